"""How far can a grouping by estimated attributes be trusted? (issue 42, item 3)

A verification dataset grouped by *estimated* attributes (``fairness.protected`` on a
scorer column such as ``age_gender_male``) can name an attribute benchmark
(``fairness.estimator_report: <dataset of kind fairface / utkface>``). For every protected
attribute whose column is an estimate with a truth label there
(:data:`facecast.attributes.estimates.TRUTH_OF_COLUMN`: P(male) -> ``label_male``, age in
years -> ``label_age``), the same spec (bins, labels) groups the benchmark's faces twice,
by the estimate and by the truth. That gives, per true group t:

- ``accuracy`` = P(estimated t | truly t) on the benchmark, with its Wilson interval
  (``bench_n`` faces of true group t, detected and scored);
- the verification dataset's people (identities, after the per-identity vote of
  ``fairness.sync``) per estimated group ``people``, and how many people each group would
  gain or lose at those error rates: the true counts n that explain the estimated counts
  m through the confusion P (P[s, t] = P(estimated t | truly s)) are the non-negative
  least-squares solution of ``P^T n = m`` (``people_true``); a group loses
  ``n_t (1 - P[t, t])`` of its people to other groups (``would_lose``) and gains
  ``sum_{s != t} n_s P[s, t]`` from them (``would_gain``); ``net`` = gain - loss.

A true group with fewer than ``estimators.min_n`` benchmark faces makes its accuracy and
the attribute's gains and losses n/a (the confusion row is not known well enough); a
grouping by a label column, by a column with no truth, or by a categorical map, says
so in ``note``. Assumes the estimator errs on the verification dataset as on the benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from facecast.attributes.estimates import DETECTED, TRUTH_OF_COLUMN
from facecast.fairness.assess import load_attributes, write_frame
from facecast.fairness.assess import run_fairness as assess_protocol
from facecast.fairness.groups import AttributeSpec, discretise, image_labels, parse_specs
from facecast.fairness.tables import to_markdown
from facecast.fairness.threshold import binomial_interval
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet
from facecast.report.html_tables import write_markdown_html

TRUST_COLUMNS = ["attribute", "column", "truth_column", "benchmark", "group", "bench_n",
                 "accuracy", "accuracy_lo", "accuracy_hi", "people", "people_true",
                 "would_lose", "would_gain", "net", "note"]


def _row(spec: AttributeSpec, bench: str, group: str = "", note: str = "",
         **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {c: np.nan for c in TRUST_COLUMNS}
    out.update(attribute=spec.name, column=spec.column,
               truth_column=TRUTH_OF_COLUMN.get(spec.column, ""), benchmark=bench,
               group=group, note=note, **values)
    return out


def why_unchecked(spec: AttributeSpec, bench_columns: set[str], bench: str) -> str:
    """Why ``spec``'s grouping cannot be checked on the benchmark ('' when it can)."""
    if spec.column.startswith("label_"):
        return f"grouped by the label column {spec.column}, not an estimate: nothing to check"
    truth = TRUTH_OF_COLUMN.get(spec.column)
    if truth is None:
        return f"n/a ({spec.column} is not an estimate facecast knows a truth label for)"
    if spec.bins is None:
        return f"n/a ({spec.column} is grouped by a value map; the truth needs bins)"
    if spec.column not in bench_columns:
        return (f"n/a (dataset {bench} has no {spec.column}: run the same scorers there)")
    if truth not in bench_columns:
        return (f"n/a (dataset {bench} has no {truth}: its truth is not in the units of "
                f"{spec.column}, e.g. FairFace gives ages as bins)")
    return ""


def confusion(bench: pd.DataFrame, spec: AttributeSpec) -> pd.DataFrame:
    """Counts of (true group, estimated group) on the benchmark's detected faces with
    both values, rows and columns in ``spec.labels`` order."""
    det = bench["status"].astype(str).isin(DETECTED)
    est = discretise(bench[spec.column], spec)
    true = discretise(bench[TRUTH_OF_COLUMN[spec.column]], spec)
    both = det & est.notna() & true.notna()
    labels = list(spec.labels)
    table = pd.crosstab(pd.Categorical(true[both], categories=labels),
                        pd.Categorical(est[both], categories=labels), dropna=False)
    return table.reindex(index=labels, columns=labels, fill_value=0)


def gain_loss(counts: np.ndarray, people: np.ndarray) -> dict[str, np.ndarray]:
    """True counts (NNLS of ``P^T n = m``) and each group's loss, gain and net at the
    confusion ``counts`` (rows: true, columns: estimated) for estimated counts ``people``."""
    p = counts / counts.sum(axis=1, keepdims=True)
    n_true, _ = nnls(p.T, people.astype(np.float64))
    lose = n_true * (1.0 - np.diag(p))
    flow = n_true[:, None] * p
    gain = flow.sum(axis=0) - np.diag(flow)
    return {"people_true": n_true, "would_lose": lose, "would_gain": gain, "net": gain - lose}


def attribute_rows(spec: AttributeSpec, bench: pd.DataFrame, people: pd.Series,
                   bench_name: str, min_n: int, confidence: float) -> list[dict[str, Any]]:
    """The rows of one protected attribute (see the module docstring)."""
    why = why_unchecked(spec, set(bench.columns), bench_name)
    if why:
        return [_row(spec, bench_name, note=why)]
    conf = confusion(bench, spec)
    counts = conf.to_numpy(np.float64)
    n = counts.sum(axis=1)
    right = np.diag(counts)
    lo, hi = binomial_interval(right, n, confidence)
    m = people.reindex(list(spec.labels), fill_value=0).to_numpy(np.float64)
    small = n < min_n
    flows = gain_loss(counts, m) if not small.any() else {}
    short = ", ".join(f"{g} ({int(k)})" for g, k in zip(spec.labels, n, strict=True) if k < min_n)
    rows = []
    for i, g in enumerate(spec.labels):
        notes = []
        if small[i]:
            notes.append(f"accuracy: n/a ({int(n[i])} {bench_name} faces < estimators.min_n "
                         f"{min_n})")
        if not flows:
            notes.append(f"gain/loss: n/a (true groups with < {min_n} {bench_name} faces: "
                         f"{short})")
        rows.append(_row(spec, bench_name, g, "; ".join(notes), bench_n=int(n[i]),
                         accuracy=np.nan if small[i] else right[i] / n[i],
                         accuracy_lo=np.nan if small[i] else lo[i],
                         accuracy_hi=np.nan if small[i] else hi[i], people=int(m[i]),
                         **{k: float(v[i]) for k, v in flows.items()}))
    return rows


def people_per_group(attrs: pd.DataFrame, specs: list[AttributeSpec], sync: str
                     ) -> dict[str, pd.Series]:
    """Identities per value of each protected attribute (after the per-identity vote;
    with ``sync: none`` an identity counts under its first image's value)."""
    labels = image_labels(attrs, specs, [], sync=sync)
    first = labels.drop_duplicates("identity")
    return {s.name: first[s.name].dropna().value_counts() for s in specs}


def trust_table(attrs: pd.DataFrame, bench: pd.DataFrame, cfg: Mapping[str, Any],
                bench_name: str, *, min_n: int = 30, confidence: float = 0.95
                ) -> pd.DataFrame:
    """Estimator accuracy and gains / losses per group of every protected attribute of
    ``cfg`` (the fairness section); ``attrs`` are the verification dataset's attribute
    rows of the people in question, ``bench`` the benchmark's attribute table."""
    specs = parse_specs(cfg.get("protected"))
    checkable = [s for s in specs if s.column in attrs.columns]
    people = people_per_group(attrs, checkable, str(cfg.get("sync", "majority")))
    rows = []
    for spec in specs:
        rows += attribute_rows(spec, bench, people.get(spec.name, pd.Series(dtype=int)),
                               bench_name, min_n, confidence)
    return pd.DataFrame(rows, columns=TRUST_COLUMNS)


def trust_markdown(table: pd.DataFrame, bench_name: str) -> str:
    """The fairness report's section on the table (empty table: nothing configured)."""
    return "\n".join([
        f"## How far the grouping can be trusted (estimators checked on {bench_name})", "",
        f"Each estimated group's true members on {bench_name}: the share the estimator put "
        "in the right group (accuracy, Wilson interval); then this protocol's people per "
        "estimated group, the true counts that explain them at those error rates "
        "(non-negative least squares through the confusion) and how many people each "
        "group would lose to the others and gain from them (net = gain - loss). Assumes "
        f"the estimator errs here as on {bench_name}; its full report is "
        f"results/{bench_name}/labels/estimators.md.", "",
        to_markdown(table), ""])


def write_estimator_trust(out_dir: str | os.PathLike, attrs: pd.DataFrame | None,
                          bench_path: str | os.PathLike | None, cfg: Mapping[str, Any],
                          estimators_cfg: Mapping[str, Any], *,
                          provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``estimator_trust.parquet`` / ``.csv`` in ``out_dir`` (no rows without
    ``fairness.estimator_report``) and, when configured, the section appended to
    ``report.md`` and its HTML twin."""
    out = Path(out_dir)
    bench_name = str(cfg.get("estimator_report") or "")
    if not bench_name or bench_path is None or attrs is None:
        table = pd.DataFrame(columns=TRUST_COLUMNS)
    else:
        table = trust_table(attrs, read_parquet(bench_path), cfg, bench_name,
                            min_n=int(estimators_cfg.get("min_n", 30)),
                            confidence=float(estimators_cfg.get("confidence", 0.95)))
    write_frame(table, out, "estimator_trust",
                {**dict(provenance or {}), "estimator_report": bench_name})
    if bench_name and bench_path is not None:
        report = out / "report.md"
        write_text(report, report.read_text() + "\n" + trust_markdown(table, bench_name))
        write_markdown_html(report, report.with_suffix(".html"))
    return table


def protocol_people(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                    cfg: Mapping[str, Any]) -> pd.DataFrame:
    """The attribute rows (protected columns) of the identities in a scores file."""
    pairs = read_parquet(scores_path, columns=["identity_a", "identity_b"])
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).astype(str).unique()
    cols = sorted({str(spec["column"]) for spec in (cfg.get("protected") or {}).values()})
    return load_attributes(attributes_path, ids, cols)


def run_fairness(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                 out_dir: str | os.PathLike, cfg: Mapping[str, Any], *,
                 estimator_attributes: str | os.PathLike | None = None,
                 estimators_cfg: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> dict[str, Any]:
    """:func:`facecast.fairness.assess.run_fairness` (every other keyword goes there), then
    :func:`write_estimator_trust` with the attribute table of the
    ``fairness.estimator_report`` dataset (``estimator_attributes``); returns the summary."""
    summary = assess_protocol(scores_path, attributes_path, out_dir, cfg, **kwargs)
    configured = bool(cfg.get("estimator_report")) and estimator_attributes is not None
    attrs = protocol_people(scores_path, attributes_path, cfg) if configured else None
    write_estimator_trust(out_dir, attrs, estimator_attributes if configured else None, cfg,
                          estimators_cfg or {}, provenance=kwargs.get("provenance"))
    return summary
