"""Rule quality_bias: quality per protected group and rejection by group, one model on one
protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.quality.stage import run_bias

    bias = run_bias(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.bias).parent,
        snakemake.params.quality,
        snakemake.params.fairness,
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        provenance=ctx.provenance,
    )
    ctx.log.info("quality bias:\n%s", bias.head(30).to_string())
