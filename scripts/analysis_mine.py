"""Rule mine_pairs: C11 hard-pair mining of one benchmark, with CAST/LFW exports."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import benchmark_mining_config, mine_benchmark
    from facecast.io.shard_index import shard_files

    cfg = benchmark_mining_config(snakemake.params.mining, snakemake.params.bench_cfg)
    cfg.extra["reference_model"] = snakemake.params.reference_model
    embeddings = snakemake.input.get("embeddings")  # none for mode cast_random
    mine_benchmark(snakemake.input.subset, shard_files(embeddings) if embeddings else [],
                   snakemake.input.manifest, snakemake.params.out_dir,
                   bench=ctx.wildcards["bench"], cfg=cfg, seed=snakemake.params.seed,
                   provenance=ctx.provenance)
