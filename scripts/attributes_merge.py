"""Rule attributes_merge: stream every scorer's shards into results/{ds}/attributes.parquet."""

from facecast.attributes.merge import merge_attributes
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    scorer_files = {s: list(snakemake.input[s]) for s in snakemake.params.scorers}
    merge_attributes(snakemake.input.manifest, list(snakemake.input.faces), scorer_files,
                     snakemake.output[0], provenance=ctx.provenance)
