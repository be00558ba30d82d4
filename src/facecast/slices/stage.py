"""What rule ``slices`` and ``facecast slices`` call: the findings and hard slices of one
model on one protocol (analysis: :func:`facecast.slices.discover.find_slices`; what a user
reads: :mod:`facecast.slices.report`).

Writes into ``results/{ds}/slices/{model}/{protocol}/`` (or the CLI's ``--out``):

===================  ==================================================================
``findings.parquet`` the findings, most important first per error type: representative
``findings.csv``     slice (words, filters), supports, error rate with its identity-
                     bootstrap interval, rest, effect, p, q, p beyond the findings
                     above, largest overlap with them, member slices
``slices.parquet``   every slice of the family (support >= the minimum) of each error
``slices.csv``       type (the CSV: the tested ones): supports, errors with intervals,
                     effect, p, q, ``significant``, rank, ``finding``
``discovered.yaml``  one facecast benchmark per finding (``benchmarks: {name:
                     {filters: [...]}}``)
``search.json``      the threshold (and why), pair rules, counts per error type, the
                     family and the columns searched
``report.html``      the findings, one line each, their example pairs, then the top
                     slices; ``slices.png`` (the findings' error rates with intervals),
``examples.png``     the hardest errors of each finding
===================  ==================================================================
"""

from __future__ import annotations

import html
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.analysis.filtering import DEFAULT_STATUSES
from facecast.fairness.hardpairs import hard_pairs_grid, load_tiles
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import frame_html, write_html_page
from facecast.slices.discover import SliceSearch, find_slices
from facecast.slices.predicates import slice_columns
from facecast.slices.report import (
    SHOWN,
    discovered_yaml,
    example_pairs,
    finding_lines,
    p_text,
    plot_findings,
    summary_text,
    terminal_report,
)
from facecast.slices.verdict import verdict_html

log = logging.getLogger(__name__)

def read_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """Scored pairs: ``image_a``, ``image_b``, ``label``, ``score`` and optionally
    ``identity_a``/``identity_b`` (absent: each image is its own identity, so the tests
    cluster by image only); ids as text."""
    pairs = read_parquet(path)
    need = ["image_a", "image_b", "label", "score"]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing}; scored pairs need {need} "
                         "(and optionally identity_a, identity_b)")
    for side in ("a", "b"):
        if f"identity_{side}" not in pairs.columns:
            log.warning("%s has no identity_%s: the tests treat each image as its own "
                        "identity (dependence between images of one person is ignored)",
                        path, side)
            pairs[f"identity_{side}"] = pairs[f"image_{side}"]
    for c in ("image_a", "image_b", "identity_a", "identity_b"):
        pairs[c] = pairs[c].astype(str)
    return pairs


def read_attributes(path: str | os.PathLike, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """The attribute table (``image_id`` + columns); only the columns the search reads."""
    names = pq.read_schema(path).names
    if "image_id" not in names:
        raise ValueError(f"{path} has no image_id column")
    cols = slice_columns(names, cfg)
    keep = ["image_id", *[c for c in ("status", "exclude") if c in names], *cols]
    return read_parquet(path, columns=keep)


def public_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as written: filter lists (and member lists, in CSV) as JSON text."""
    out = frame.drop(columns=[c for c in ("pred_ids",) if c in frame.columns])
    return out.assign(definition=[json.dumps(d) for d in out["definition"]])


def deterministic_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The search summary as ``search.json`` keeps it: without the wall-clock ``seconds``
    per error type (those go to the log), so the same config writes the same bytes."""
    out = dict(info)
    out["by_error"] = {e: {k: v for k, v in c.items() if k != "seconds"}
                       for e, c in dict(info.get("by_error") or {}).items()}
    return out


def write_slices(result: SliceSearch, out_dir: str | os.PathLike, cfg: Mapping[str, Any], *,
                 model: str, protocol: str, faces_paths: Sequence[str] = (),
                 provenance: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Every output file of one search (see the module docstring); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "slices", "model": model,
            "protocol": protocol}
    names = {"parquet": "slices.parquet", "csv": "slices.csv", "findings": "findings.parquet",
             "findings_csv": "findings.csv", "yaml": "discovered.yaml",
             "json": "search.json", "html": "report.html", "png": "slices.png",
             "examples": "examples.png"}
    paths = {k: out / v for k, v in names.items()}
    table, findings, info = public_table(result.table), result.findings, result.info
    write_parquet(table, paths["parquet"], provenance=prov)
    write_text(paths["csv"], table[table["tested"]].to_csv(index=False))
    public = public_table(findings)
    write_parquet(public, paths["findings"], provenance=prov)
    write_text(paths["findings_csv"], public.assign(
        members=[json.dumps(list(m)) for m in public["members"]]).to_csv(index=False))
    write_text(paths["json"], json.dumps(deterministic_info(info), indent=1, sort_keys=True,
                                         default=float) + "\n")
    write_text(paths["yaml"], discovered_yaml(findings, info, model=model, protocol=protocol))
    top = int(cfg.get("report_top", 10))
    title = f"{model} on {protocol}: findings (slices where it errs most)"
    plot_findings(findings, result.table, info, str(paths["png"]), title, top)
    examples = example_pairs(findings, finding_members(result), result.scored.pairs)
    tiles = load_tiles(list(examples["image_a"]) + list(examples["image_b"]), faces_paths)
    hard_pairs_grid(examples, tiles, paths["examples"])
    write_html_page(paths["html"], title, report_body(result, examples, top))
    return paths


def finding_members(result: SliceSearch) -> list[np.ndarray]:
    """Each finding's representative slice over the searched pairs (its own pair rule)."""
    out = []
    for f in result.findings.itertuples(index=False):
        out.append(result.space.members(np.asarray(f.pred_ids, np.int64), result.scored.ia,
                                        result.scored.ib, result.info["pair"][f.error_type]))
    return out


def report_body(result: SliceSearch, examples: pd.DataFrame, top: int) -> list[str]:
    """The report page: what was searched, the findings (one line each) with their
    example pairs, then the slice table (the ``top`` of each error type)."""
    table, findings, info = result.table, result.findings, result.info
    lines = [verdict_html(info, findings), f"<p>{html.escape(summary_text(info))}</p>"]
    if len(findings):
        lines.append(frame_html(finding_lines(findings),
                                caption="findings: distinct effects, most important first "
                                        "(rate: identity-bootstrap 95% interval; p beyond: "
                                        "the effect beyond the findings above it)"))
    else:
        lines.append("<p><b>No finding</b>: no slice is significant at the false-discovery "
                     "rate; the lowest p-values follow.</p>")
    if len(examples):
        lines.append('<p><img src="examples.png" alt="the hardest errors of each finding" '
                     'style="max-width:100%"></p>')
        lines.append(frame_html(examples[["group", "slice", "image_a", "image_b", "score"]],
                                caption="hardest errors of each finding (examples.png)"))
    for etype in info["by_error"]:
        t = public_table(table[table["error_type"] == etype])
        rows = t[t["rank"].notna()].head(top)
        if rows.empty:
            rows = t[t["tested"]].sort_values("p", kind="stable").head(top)
        rows = rows.assign(p=[p_text(x) for x in rows["p"]], q=[p_text(x) for x in rows["q"]])
        lines.append(frame_html(rows[[c for c in SHOWN if c in rows.columns]],
                                caption=f"{etype.upper()}: top slices (interval: Korn-"
                                        "Graubard, identity-clustered; the tested slices "
                                        "in slices.csv, every slice in slices.parquet)"))
    return lines


def run_slices(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
               out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, model: str,
               protocol: str, seed: int, statuses: Sequence[str] = DEFAULT_STATUSES,
               faces_paths: Sequence[str] = (), accuracy: Mapping[str, Any] | None = None,
               provenance: Mapping[str, Any] | None = None) -> SliceSearch:
    """Search one model's scored pairs and write every output; returns the search."""
    pairs = read_pairs(scores_path)
    attrs = read_attributes(attributes_path, cfg)
    result = find_slices(pairs, attrs, cfg, seed=seed, statuses=tuple(statuses),
                         accuracy=accuracy)
    thr = result.info["threshold"]
    if thr["why"]:
        log.warning("slices.threshold: %s", thr["why"])
    log.info("%s on %s: %s", model, protocol, summary_text(result.info))
    for etype, counts in dict(result.info.get("by_error") or {}).items():
        log.info("%s search and tests: %.1f s", etype, float(counts.get("seconds", 0.0)))
    write_slices(result, out_dir, cfg, model=model, protocol=protocol,
                 faces_paths=faces_paths, provenance=provenance)
    log.info("findings of %s on %s:\n%s", model, protocol, terminal_report(result))
    return result
