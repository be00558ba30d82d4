"""Rule embed_fit: fit a fitted backend's per-dataset transform (LBP PCA whitening)."""

from facecast.embed.stage import fit_model
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    fit_model(
        snakemake.input.manifest,
        list(snakemake.input.faces),
        snakemake.output.fit,
        snakemake.wildcards.model,
        dict(snakemake.params.model),
        dict(snakemake.params.embed),
        threads=ctx.threads,
    )
