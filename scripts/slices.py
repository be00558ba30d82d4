"""Rule slices: the hard attribute slices of one model on one protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.io.shard_index import shard_files
    from facecast.slices.stage import run_slices

    run_slices(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.parquet).parent,
        snakemake.params.slices,
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        statuses=list(snakemake.params.statuses),
        faces_paths=shard_files(snakemake.input.faces) if snakemake.input.get("faces") else [],
        accuracy=snakemake.params.accuracy,
        provenance=ctx.provenance,
    )
