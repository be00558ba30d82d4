"""Rule compare: every pair of models on every benchmark of one dataset."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.compare.stage import run_compare

    scores: dict = {}
    for key, path in zip(snakemake.params.names, snakemake.input, strict=True):
        bench, model = key.split("/", 1)
        scores.setdefault(bench, {})[model] = path
    diff = run_compare(scores, Path(snakemake.output.differences).parent,
                       snakemake.params.compare, fars=list(snakemake.params.fars),
                       seed=int(snakemake.params.seed), accuracy=snakemake.params.accuracy,
                       provenance=ctx.provenance)
    ctx.log.info("%d comparisons, %d tested, %d significant (Holm across all tests)",
                 len(diff), int(diff["p"].notna().sum()), int(diff["significant"].sum()))
