"""Rule lfw_protocol: parse an LFW view-2 pairs.txt into a fixed verification protocol."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import write_lfw_protocol

    write_lfw_protocol(snakemake.params.pairs_file, snakemake.input.manifest,
                       snakemake.output.pairs, provenance=ctx.provenance)
