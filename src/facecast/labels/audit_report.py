"""The label audit's readable outputs: ``summary.md`` and ``report.html`` of a finished
audit (:func:`write_reports`), its summary figures (:func:`write_figures`), and every
output of an audit with nothing to audit (:func:`write_empty`).
:func:`facecast.labels.audit.run_audit` calls them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.html import write_html
from facecast.labels.plots import f1_prevalence_plot, kappa_plot, measurement_plot

__all__ = ["write_empty", "write_figures", "write_reports"]


def write_reports(out: Path, *, n_images: int, attrs: Sequence[str], prefix: str,
                  sources: Sequence[str], notes: Sequence[str], metrics: pd.DataFrame,
                  rule_table: pd.DataFrame, kappa_table: pd.DataFrame,
                  recovery: pd.DataFrame, suspects: pd.DataFrame, ids: pd.DataFrame,
                  skew: pd.DataFrame, phi: pd.DataFrame) -> None:
    """summary.md (metrics, contradictions, agreement, recovery when truth is known) and
    report.html (the same plus suspects, identity suspects, group skew and phi)."""
    lines = ["# Label audit", "", f"{n_images} images, {len(attrs)} attributes "
             f"(`{prefix}*`); sources: {', '.join(sources) or 'none'}.", "",
             *[f"- {n}" for n in notes], "",
             "## Metrics (F1 first)", "", metrics.to_markdown(index=False, floatfmt=".3f"), "",
             "## Contradictions", "", rule_table.to_markdown(index=False, floatfmt=".4f"), "",
             "## Agreement", "", kappa_table.to_markdown(index=False, floatfmt=".3f"), ""]
    if len(recovery):
        lines += ["## Recovery of planted noise", "",
                  recovery.to_markdown(index=False, floatfmt=".3f"), ""]
    write_text(out / "summary.md", "\n".join(lines))
    sections = [("Notes", "\n".join(f"- {n}" for n in notes) or "none"),
                ("Metrics per attribute (F1 first)", metrics),
                ("Contradiction rules", rule_table),
                ("Agreement (Fleiss: identities x images; Cohen; Krippendorff)", kappa_table)]
    if len(recovery):
        sections.append(("Recovery of the planted noise (truth known)", recovery))
    sections += [("Top 30 suspect labels", suspects.head(30)),
                 ("Identity-level suspects (top 10 per attribute)",
                  ids.groupby("attribute").head(10) if len(ids) else ids),
                 ("Group skew: P(label | group), P(prediction | group), disagreement", skew),
                 ("Label vs prediction phi (bias amplification)", phi)]
    write_html(out / "report.html", "Label audit", sections)


def write_figures(out: Path, kappa_table: pd.DataFrame, metrics: pd.DataFrame,
                  labels: pd.DataFrame, features: str | os.PathLike | None) -> None:
    """kappa.png, f1_vs_prevalence.png and measurements.png (landmark measures vs labels,
    when the features table exists)."""
    kappa_plot(kappa_table, out / "kappa.png")
    f1_prevalence_plot(metrics[metrics["attribute"] != "macro average"], out /
                       "f1_vs_prevalence.png")
    meas = read_parquet(features) if features and Path(features).exists() else None
    measurement_plot(meas, labels, out / "measurements.png")


def write_empty(out: Path, table: pd.DataFrame, reason: str,
                prov: Mapping[str, Any]) -> dict[str, Any]:
    """Every audit output, each saying why there is nothing to audit."""
    status = pd.DataFrame({"status": [reason]})
    ids = pd.DataFrame({"image_id": table["image_id"].astype(str),
                        "identity": table["identity"].astype(str), "status": reason})
    for name in ("metrics", "kappa"):
        write_parquet(status, out / f"{name}.parquet", provenance=prov)
        status.to_csv(out / f"{name}.csv", index=False)
    for name in ("rules", "suspects_top", "group_skew", "phi", "recovery"):
        status.to_csv(out / f"{name}.csv", index=False)
    for name in ("flags", "predictions"):
        write_parquet(ids, out / f"{name}.parquet", provenance=prov)
    write_parquet(pd.DataFrame(columns=["image_id", "identity", "attribute", "label", "score",
                                        "model", "identity_disagreement", "rule", "reasons",
                                        "rank"]), out / "suspects.parquet", provenance=prov)
    write_parquet(pd.DataFrame(columns=["attribute", "identity"]), out / "identities.parquet",
                  provenance=prov)
    write_text(out / "summary.md", f"# Label audit\n\n{reason}\n")
    write_html(out / "report.html", "Label audit", [("Status", reason)])
    from facecast.report.figures import pyplot, save_figure

    for name in ("kappa", "f1_vs_prevalence", "phi", "measurements", "suspects_grid"):
        fig, ax = pyplot().subplots(figsize=(5, 1.5))
        ax.text(0.5, 0.5, reason, ha="center", va="center", fontsize=8, wrap=True)
        ax.set_axis_off()
        save_figure(fig, out / f"{name}.png")
    return {"n_images": int(len(table)), "attributes": [], "status": reason}
