"""Rule benchmark_subset: CAST filters -> subset.parquet + description.txt."""

from facecast.analysis.filtering import build_subset, parse_filters
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    report = build_subset(snakemake.input.attributes,
                          parse_filters(snakemake.params.filters, ctx.wildcards["bench"],
                                        snakemake.params.rank_method),
                          snakemake.output.subset, snakemake.output.description,
                          statuses=snakemake.params.statuses, provenance=ctx.provenance)
    ctx.log.info("subset %s: %s", ctx.wildcards["bench"], report)
