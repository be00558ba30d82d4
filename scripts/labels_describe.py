"""Rule describe: template face descriptions and their rater-free evaluation."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.labels.stage import run_describe

    run_describe(
        snakemake.input.attributes,
        snakemake.params.out_dir,
        snakemake.params.cfg,
        snakemake.params.audit_cfg,
        predictions=snakemake.input.get("predictions") or None,
        kappa=snakemake.input.get("kappa") or None,
        features_images=snakemake.input.get("features_images") or None,
        features_identities=snakemake.input.get("features_identities") or None,
        seed=int(snakemake.params.seed),
        provenance=ctx.provenance,
    )
