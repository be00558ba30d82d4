"""How far can a grouping by estimated attributes be trusted? (issues 42.3, 47.5)

A verification dataset grouped by *estimated* attributes (``fairness.protected`` on a
scorer column such as ``age_gender_male``) can name an attribute benchmark
(``fairness.estimator_report: <dataset of kind fairface / utkface>``). For every protected
attribute whose column is an estimate with a truth label there
(:data:`facecast.attributes.estimates.TRUTH_OF_COLUMN`: P(male) -> ``label_male``, age in
years -> ``label_age``; more through ``truths``, e.g. an imported classifier's race
column -> ``label_race``), the same spec (bins and labels, or a value map applied to the
estimate's and the truth's values alike) groups the benchmark's faces twice, by the
estimate and by the truth. The estimator's own training images on the benchmark
(:func:`facecast.attributes.estimates.trained_splits`: the fairface head on FairFace's
train split) are left out and counted (``bench_train_excluded``). That gives, per true
group t:

- ``accuracy`` = P(estimated t | truly t) on the benchmark, with its Wilson interval
  (``bench_n`` faces of true group t, detected and scored);
- ``people``: the verification dataset's identities per estimated group (after the
  per-identity vote of ``fairness.sync``), for scale;
- in one unit, images (``unit``): ``images`` per estimated group (each image's own
  estimate), the true counts n that explain them through the benchmark's per-image
  confusion P (P[s, t] = P(estimated t | truly s)) as the non-negative least-squares
  solution of ``P^T n = images`` (``images_true``), and how many images each group would
  lose, ``n_t (1 - P[t, t])`` (``would_lose``), and gain, ``sum_{s != t} n_s P[s, t]``
  (``would_gain``); ``net`` = gain - loss. The confusion is per image (the benchmarks have
  no identities), so it is applied to images, never to per-person majorities: a vote over
  a person's images corrects some single-image errors, by an amount the benchmark cannot
  show.

A true group with fewer than ``estimators.min_n`` benchmark faces makes its accuracy and
the attribute's gains and losses n/a (the confusion row is not known well enough); a
grouping by a label column or by a column with no truth says so in ``note``. Assumes the
estimator errs on the verification dataset as on the benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from facecast.attributes.estimates import (
    DETECTED,
    ESTIMATES,
    TRUTH_OF_COLUMN,
    trained_splits,
)
from facecast.fairness.assess import load_attributes, write_frame
from facecast.fairness.assess import run_fairness as assess_protocol
from facecast.fairness.groups import AttributeSpec, discretise, image_labels, parse_specs
from facecast.fairness.tables import to_markdown
from facecast.fairness.threshold import binomial_interval
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet
from facecast.report.html_tables import write_markdown_html

TRUST_COLUMNS = ["attribute", "column", "truth_column", "benchmark", "group", "bench_n",
                 "bench_train_excluded", "accuracy", "accuracy_lo", "accuracy_hi", "people",
                 "unit", "images", "images_true", "would_lose", "would_gain", "net", "note"]
#: the estimator each built-in estimate column belongs to (its training data)
ESTIMATOR_OF_COLUMN = {c: e.estimator for e in ESTIMATES for c in e.columns}


def _row(spec: AttributeSpec, bench: str, truth: str, group: str = "", note: str = "",
         **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {c: np.nan for c in TRUST_COLUMNS}
    out.update(attribute=spec.name, column=spec.column, truth_column=truth, benchmark=bench,
               group=group, note=note, unit="images", **values)
    return out


def bench_kind(columns: set[str] | list[str]) -> str:
    """The benchmark's dataset kind, read from its label columns (``label_service_test``
    is FairFace's alone; else UTKFace)."""
    return "fairface" if "label_service_test" in set(columns) else "utkface"


def why_unchecked(spec: AttributeSpec, bench_columns: set[str], bench: str,
                  truths: Mapping[str, str] | None = None) -> str:
    """Why ``spec``'s grouping cannot be checked on the benchmark ('' when it can)."""
    if spec.column.startswith("label_"):
        return f"grouped by the label column {spec.column}, not an estimate: nothing to check"
    truth = {**TRUTH_OF_COLUMN, **(truths or {})}.get(spec.column)
    if truth is None:
        return f"n/a ({spec.column} is not an estimate facecast knows a truth label for)"
    if spec.column not in bench_columns:
        return (f"n/a (dataset {bench} has no {spec.column}: run the same scorers there)")
    if truth not in bench_columns:
        return (f"n/a (dataset {bench} has no {truth}: its truth is not in the units of "
                f"{spec.column}, e.g. FairFace gives ages as bins)")
    return ""


def confusion(bench: pd.DataFrame, spec: AttributeSpec, truth: str,
              rows: pd.Series | None = None) -> pd.DataFrame:
    """Counts of (true group, estimated group) on the benchmark's detected faces with
    both values (of ``rows`` when given), rows and columns in the spec's value order; the
    truth column ``truth`` goes through the same bins or value map as the estimate."""
    det = bench["status"].astype(str).isin(DETECTED)
    est = discretise(bench[spec.column], spec)
    true = discretise(bench[truth], spec)
    both = det & est.notna() & true.notna() & (True if rows is None else rows)
    labels = list(spec.order)
    table = pd.crosstab(pd.Categorical(true[both], categories=labels),
                        pd.Categorical(est[both], categories=labels), dropna=False)
    return table.reindex(index=labels, columns=labels, fill_value=0)


def gain_loss(counts: np.ndarray, images: np.ndarray) -> dict[str, np.ndarray]:
    """True counts (NNLS of ``P^T n = m``) and each group's loss, gain and net at the
    per-image confusion ``counts`` (rows: true, columns: estimated) for the estimated
    image counts ``images`` (all in images)."""
    p = counts / counts.sum(axis=1, keepdims=True)
    n_true, _ = nnls(p.T, images.astype(np.float64))
    lose = n_true * (1.0 - np.diag(p))
    flow = n_true[:, None] * p
    gain = flow.sum(axis=0) - np.diag(flow)
    return {"images_true": n_true, "would_lose": lose, "would_gain": gain, "net": gain - lose}


def training_rows(bench: pd.DataFrame, column: str,
                  declared: Mapping[str, Mapping[str, Sequence[str]]] | None = None
                  ) -> pd.Series:
    """The benchmark rows the estimator of ``column`` was trained on (its split among
    :func:`facecast.attributes.estimates.trained_splits` of the benchmark's kind)."""
    splits = trained_splits(ESTIMATOR_OF_COLUMN.get(column, column), bench_kind(bench.columns),
                            declared)
    if not splits or "split" not in bench:
        return pd.Series(False, index=bench.index)
    return bench["split"].astype(str).isin(splits)


def attribute_rows(spec: AttributeSpec, bench: pd.DataFrame, counts_of: Mapping[str, pd.Series],
                   bench_name: str, min_n: int, confidence: float,
                   truths: Mapping[str, str] | None = None,
                   declared: Mapping[str, Mapping[str, Sequence[str]]] | None = None
                   ) -> list[dict[str, Any]]:
    """The rows of one protected attribute (see the module docstring); ``counts_of``:
    ``people`` and ``images`` of the verification dataset per estimated value."""
    truth = {**TRUTH_OF_COLUMN, **(truths or {})}.get(spec.column, "")
    why = why_unchecked(spec, set(bench.columns), bench_name, truths)
    if why:
        return [_row(spec, bench_name, truth, note=why)]
    train = training_rows(bench, spec.column, declared)
    conf = confusion(bench, spec, truth, ~train)
    labels = list(conf.index)
    excluded = confusion(bench, spec, truth, train).to_numpy().sum(axis=1)
    counts = conf.to_numpy(np.float64)
    n = counts.sum(axis=1)
    right = np.diag(counts)
    lo, hi = binomial_interval(right, np.maximum(n, 1), confidence)
    people = counts_of["people"].reindex(labels, fill_value=0).to_numpy(np.float64)
    m = counts_of["images"].reindex(labels, fill_value=0).to_numpy(np.float64)
    small = n < min_n
    flows = gain_loss(counts, m) if not small.any() else {}
    short = ", ".join(f"{g} ({int(k)})" for g, k in zip(labels, n, strict=True) if k < min_n)
    rows = []
    for i, g in enumerate(labels):
        notes = []
        if small[i]:
            notes.append(f"accuracy: n/a ({int(n[i])} {bench_name} faces < estimators.min_n "
                         f"{min_n})")
        if not flows:
            notes.append(f"gain/loss: n/a (true groups with < {min_n} {bench_name} faces: "
                         f"{short})")
        rows.append(_row(spec, bench_name, truth, g, "; ".join(notes), bench_n=int(n[i]),
                         bench_train_excluded=int(excluded[i]),
                         accuracy=np.nan if small[i] else right[i] / n[i],
                         accuracy_lo=np.nan if small[i] else lo[i],
                         accuracy_hi=np.nan if small[i] else hi[i], people=int(people[i]),
                         images=int(m[i]), **{k: float(v[i]) for k, v in flows.items()}))
    return rows


def counts_per_group(attrs: pd.DataFrame, specs: list[AttributeSpec], sync: str
                     ) -> dict[str, dict[str, pd.Series]]:
    """Per protected attribute: ``people``, identities per value (after the per-identity
    vote; with ``sync: none`` an identity counts under its first image's value), and
    ``images``, images per value of their own estimate."""
    labels = image_labels(attrs, specs, [], sync=sync)
    first = labels.drop_duplicates("identity")
    own = {s.name: discretise(attrs[s.column], s) for s in specs}
    return {s.name: {"people": first[s.name].dropna().value_counts(),
                     "images": own[s.name].dropna().value_counts()} for s in specs}


def trust_table(attrs: pd.DataFrame, bench: pd.DataFrame, cfg: Mapping[str, Any],
                bench_name: str, *, min_n: int = 30, confidence: float = 0.95,
                truths: Mapping[str, str] | None = None,
                declared: Mapping[str, Mapping[str, Sequence[str]]] | None = None
                ) -> pd.DataFrame:
    """Estimator accuracy and gains / losses per group of every protected attribute of
    ``cfg`` (the fairness section); ``attrs`` are the verification dataset's attribute
    rows of the people in question, ``bench`` the benchmark's attribute table;
    ``truths``: more estimate columns -> truth label columns; ``declared``: training data
    per estimator (``estimators.imports.<name>.trained_on``)."""
    specs = parse_specs(cfg.get("protected"))
    checkable = [s for s in specs if s.column in attrs.columns]
    counts = counts_per_group(attrs, checkable, str(cfg.get("sync", "majority")))
    empty = {"people": pd.Series(dtype=int), "images": pd.Series(dtype=int)}
    rows = []
    for spec in specs:
        rows += attribute_rows(spec, bench, counts.get(spec.name, empty), bench_name, min_n,
                               confidence, truths, declared)
    return pd.DataFrame(rows, columns=TRUST_COLUMNS)


def trust_markdown(table: pd.DataFrame, bench_name: str) -> str:
    """The fairness report's section on the table (empty table: nothing configured)."""
    return "\n".join([
        f"## How far the grouping can be trusted (estimators checked on {bench_name})", "",
        f"- **accuracy**: each estimated group's true members on {bench_name}, the share the "
        "estimator put in the right group (Wilson interval); the estimator's own training "
        f"images on {bench_name} are left out (bench_train_excluded).",
        "- **people**: this protocol's identities per estimated group (after the vote), "
        "for scale.",
        "- In images (the unit of the benchmark's confusion, so of every figure after it): "
        "**images** per estimated group, **images_true** the true counts that explain them "
        "at those error rates (non-negative least squares through the confusion), "
        "**would_lose** / **would_gain** the images each group would lose to the others "
        "and gain from them, **net** = gain - loss. A vote over a person's images corrects "
        "some single-image errors, so per person the flows are smaller by an amount the "
        "benchmark cannot show.",
        f"- Assumes the estimator errs here as on {bench_name}; its full report is "
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
        imports = estimators_cfg.get("imports") or {}
        table = trust_table(attrs, read_parquet(bench_path), cfg, bench_name,
                            min_n=int(estimators_cfg.get("min_n", 30)),
                            confidence=float(estimators_cfg.get("confidence", 0.95)),
                            declared={str(k): dict((v or {}).get("trained_on") or {})
                                      for k, v in imports.items()})
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
