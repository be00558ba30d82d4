"""Rule fairness: bias metrics of one model on one protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import dataset_root
    from facecast.fairness.stage import run_fairness
    from facecast.io.shard_index import shard_files

    ds = ctx.wildcards["ds"]
    summary = run_fairness(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.summary).parent,
        snakemake.params.fairness,
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        failed=str(snakemake.params.failed),
        provenance=ctx.provenance,
        reuse_thresholds=snakemake.input.get("thresholds"),
        faces_paths=shard_files(snakemake.input.faces) if snakemake.input.get("faces") else [],
        manifest_path=snakemake.input.manifest,
        estimator_attributes=snakemake.input.get("estimator_attributes"),
        estimators_cfg=snakemake.params.estimators,
        dataset_root=(dataset_root(ctx.dataset(), f"results/{ds}/dataset")
                      if snakemake.params.get("read_images", True) else None),
    )
    ctx.log.info("fairness summary: %s", summary)
