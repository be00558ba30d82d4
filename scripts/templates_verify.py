"""Rule templates_verify: pool one model's IJB features into templates, score the pairs."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.io.shard_index import shard_files
    from facecast.templates.stage import run_templates

    run_templates(snakemake.params.root, snakemake.params.variant,
                  shard_files(snakemake.input.embeddings), Path(snakemake.output.table).parent,
                  snakemake.params.cfg, model=ctx.wildcards["model"],
                  model_cfg=snakemake.params.model_cfg, provenance=ctx.provenance)
