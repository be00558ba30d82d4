"""Rule mitigation: every method on one model and protocol, side by side.

The work sits under the main guard: a large table's bootstrap runs in worker processes,
which re-run this file's top level (see :mod:`facecast.parallel`).
"""

from pathlib import Path

from facecast.workflow_glue import script_context

if __name__ == "__main__":
    with script_context(snakemake) as ctx:
        from facecast.mitigation.stage import run_mitigation

        inputs = {k: v for k, v in snakemake.input.items()}
        source = snakemake.params.source
        table = run_mitigation(
            inputs, Path(snakemake.output.table).parent, snakemake.params.mitigation,
            snakemake.params.fairness, methods=list(snakemake.params.methods),
            partners=list(snakemake.params.partners), fars=list(snakemake.params.fars),
            seed=int(snakemake.params.seed), model=ctx.wildcards["model"],
            protocol=ctx.wildcards["protocol"], ds=ctx.wildcards["ds"],
            source=tuple(source) if source else None, provenance=ctx.provenance,
            threads=ctx.threads, unavailable=dict(snakemake.params.unavailable),
            failed=snakemake.params.failed)
        ctx.log.info("%d methods (%d n/a on this model) on %d evaluated pairs", len(table),
                     int((table["status"] == "n/a").sum()), int(table["n_pairs"].iloc[0]))
