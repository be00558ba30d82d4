"""Rule set_protocol: one protocol of an RFW or BFW dataset -> protocol Parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_set_protocol

    pairs = write_set_protocol(ctx.dataset(), ctx.wildcards["proto"], snakemake.input.manifest,
                               snakemake.output.pairs, provenance=ctx.provenance)
    ctx.log.info("%d pairs, statuses %s", len(pairs), pairs["status"].value_counts().to_dict())
