"""Rule export_bin: mined benchmarks as an insightface verification .bin (export.bins)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import export_benchmark_bin

    benches = snakemake.params.cfg["benchmarks"]
    export_benchmark_bin({b: snakemake.input[f"pairs_{b}"] for b in benches},
                         snakemake.input.faces, snakemake.output.bin,
                         name=ctx.wildcards["name"], cfg=snakemake.params.cfg,
                         seed=snakemake.params.seed, provenance=ctx.provenance)
