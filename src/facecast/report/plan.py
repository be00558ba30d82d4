"""The run's plan: what the config derived and which stages are skipped, and why.

:func:`facecast.config.prepare.fill_defaults` returns one line per derived default or
skipped stage (``fairness: skipped - no protected attribute ...; set fairness.protected
...``). :func:`write_plan` writes them as ``results/<ds>/plan.md`` (one per dataset of the
config: a second config's run in the same folder keeps it) and an HTML twin for the
report, so a stage that did not run says so where the user looks for its output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from facecast.io.atomic import write_text
from facecast.report.html_tables import write_markdown_html


def plan_markdown(lines: Sequence[str]) -> str:
    """The plan as Markdown: a heading, then one bullet per line (or a sentence saying
    every stage runs as configured)."""
    body = ([f"- {line}" for line in lines] if lines
            else ["Every configured stage runs with the config as written; no default was "
                  "derived and no stage was skipped."])
    return "\n".join(["# Run plan", "",
                      "Defaults derived from what this run produces, and stages that are "
                      "off or skipped (with the key that turns each on).", "", *body, ""])


def write_plan(lines: Sequence[str], md_path: str | os.PathLike,
               html_path: str | os.PathLike) -> str:
    """Write the plan as Markdown and HTML; return the Markdown."""
    text = plan_markdown(lines)
    write_text(md_path, text)
    write_markdown_html(md_path, html_path, title="Run plan")
    return text
