"""Rule covariates: the covariate-conditioned score model of one model on one protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.covariates.stage import run_covariates

    fit = run_covariates(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.fit).parent,
        {k: v for k, v in dict(snakemake.params.covariates).items()
         if k not in ("enabled", "models", "protocols", "datasets")},
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        failed=str(snakemake.params.failed),
        provenance=ctx.provenance,
    )
    ctx.log.info("covariates: selected %s",
                 {c: v["selected"] for c, v in fit["classes"].items()})
