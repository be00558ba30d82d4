"""Rule evaluate_scores: a BFW score model (a datatable column) on its protocol."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import evaluate_given_scores

    evaluate_given_scores(snakemake.input.protocol, snakemake.output.scores,
                          snakemake.params.out_dir, model=ctx.wildcards["model"],
                          benchmark=ctx.wildcards["bench"], cfg=snakemake.params.cfg,
                          provenance=ctx.provenance)
