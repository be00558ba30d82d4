"""Rule evaluate_benchmark: score one embedder on one protocol; metrics, ROC and DET."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import evaluate_benchmark
    from facecast.io.shard_index import shard_files

    evaluate_benchmark(snakemake.input.protocol, shard_files(snakemake.input.embeddings),
                       snakemake.output.scores, snakemake.params.out_dir,
                       model=ctx.wildcards["model"], benchmark=ctx.wildcards["bench"],
                       cfg=snakemake.params.cfg, provenance=ctx.provenance)
