"""Rule fairness_import: scores in the challenge CSV format -> evaluation-layout Parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.fairness.stage import import_scores

    scored = import_scores(
        snakemake.input.predictions,
        snakemake.input.pairs,
        snakemake.input.attributes,
        snakemake.output.scores,
        label_column=snakemake.params.label_column,
        provenance=ctx.provenance,
    )
    ctx.log.info("imported %d pairs, statuses %s", len(scored),
                 scored["status"].value_counts().to_dict())
