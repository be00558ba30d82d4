"""Checkpoint manifest: read the dataset layout, write the sharded manifest."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import build_manifest

    out = Path(snakemake.output.manifest)
    manifest = build_manifest(snakemake.params.spec, out.parent / "dataset", out,
                              provenance=ctx.provenance)
    ctx.log.info("manifest: %d rows, statuses %s", len(manifest),
                 manifest["status"].value_counts().to_dict())
