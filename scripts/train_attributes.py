"""Rule attribute_model: train the multi-label ResNet-18 head on the manifest's labels."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import train_model
    from facecast.io.shard_index import shard_files

    train_model(
        snakemake.input.manifest, shard_files(snakemake.input.faces), snakemake.output.checkpoint,
        snakemake.output.evaluation, snakemake.output.report, snakemake.params.cfg,
        seed=int(snakemake.params.cfg.get("seed") or ctx.config["seed"]),
        device=snakemake.params.device, provenance=ctx.provenance)
