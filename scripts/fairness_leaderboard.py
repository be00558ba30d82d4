"""Rule fairness_leaderboard: rank every model of a dataset on one protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.fairness.stage import run_leaderboard

    board = run_leaderboard(
        list(snakemake.input.summaries),
        list(snakemake.input.groups),
        Path(snakemake.output.markdown).parent,
        ctx.wildcards["protocol"],
        provenance=ctx.provenance,
        baseline=str(((ctx.config.get("fairness") or {}).get("leaderboard") or {})
                     .get("baseline", "")),
    )
    ctx.log.info("leaderboard:\n%s", board.to_string())
