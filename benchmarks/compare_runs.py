"""Two runs of the same config side by side: wall time per stage, and every metric table.

Issue 40.5: the demo on a GPU machine with the GPU on (config/gpu.yaml) beside the same
machine's CPU-only run. ``benchmarks/gpu_check.sh`` runs both and then this script:

    python benchmarks/compare_runs.py RUN_A RUN_B [--labels cpu,gpu] [--tol 1e-4]

RUN_A and RUN_B are Snakemake working directories (each with ``results/``).

**Times.** Every rule with ``benchmark:`` writes ``results/<ds>/runtime/<stage>/...tsv``
(Snakemake's ``s`` column: the job's wall seconds). Per stage (the folders below
``runtime/``; a top-level ``<rule>.tsv`` is its own stage) the table gives the number of
jobs, the sum of their seconds and the stage's span: from the earliest job start (file
time minus ``s``) to the last job end (file time), which is what the stage costs the run
on a machine that runs its jobs side by side.

**Metrics.** Every Parquet table under the evaluation stages' folders of
``results/<ds>/`` (``eval``, ``fairness``, ``demographics``, ``quality``, ``identification``,
``templates``, ``covariates``, ``slices``, ``compare``, ``mitigation``: metrics, per-group
rates, thresholds, bootstrap bands, and the pair scores they come from) must exist in both
runs with the same columns and rows; text and boolean cells must be equal, numeric cells
(lists of numbers element by element) within the tolerance:

    |a - b| <= tol * max(1, |a|, |b|)      (NaN equals NaN; +-inf equals itself)

The default ``tol = 1e-4`` is the issue's rule for fp32 ("none should move beyond the 4th
decimal"): an absolute 1e-4 for rates, AUCs, accuracies and cosine scores (all in
[-1, 1]), the same relative share for unbounded numbers (squared-L2 thresholds, counts,
log-likelihoods). Why it holds on a GPU: with ``embed.amp: none`` and TF32 off, a CUDA
embedding differs from the CPU's by about 1e-6 (float32 sums in another order), so scores
move by about 1e-6 and every metric that is smooth in the scores by as little; a rate moves
by 1/n only where a score sits within ~1e-6 of a threshold (1/20,000 = 5e-5 for the demo's
impostor rates). A cell beyond it is a real difference (a face detected differently, a
pair mined differently) and is listed with its file, column and row.

**Recomputed.** ``--newer-than MARKER``: every metric table of RUN_B must be newer than the
file MARKER, else it is a problem (``not recomputed``). The GPU check makes RUN_B as a
copy of RUN_A (faces computed once, on one device, for both runs: issue 48) and reruns
embed and everything after it there; a table the second run left as copied would compare
equal to itself and pass for nothing.

Prints the stage table, the per-file maxima, the worst cells, and a last line
``metrics <a> vs <b> within <tol>: PASS|FAIL (...)``; exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.io.parquet_io import read_parquet

#: folders of results/<ds>/ whose tables hold evaluation numbers
METRIC_STAGES = ("eval", "fairness", "demographics", "quality", "identification", "templates",
                 "covariates", "slices", "compare", "mitigation")
TOL = 1e-4
#: cells kept (the worst) per column beyond the tolerance
KEEP = 5


@dataclass
class Cell:
    """One cell beyond the tolerance."""

    table: str
    column: str
    row: int
    a: object
    b: object
    diff: float


@dataclass
class Comparison:
    """What comparing the tables of two runs found."""

    tables: int = 0
    values: int = 0
    beyond: int = 0                                     # cells beyond the tolerance
    max_diff: float = 0.0
    problems: list[str] = field(default_factory=list)   # missing files, shapes, columns
    cells: list[Cell] = field(default_factory=list)     # the worst of them, per column
    per_table: list[tuple[str, int, float, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.beyond


def metric_tables(run: Path, stages: tuple[str, ...] = METRIC_STAGES) -> list[str]:
    """Paths (relative to ``run``) of every Parquet file under ``results/*/<stage>/``."""
    out: list[str] = []
    for ds in sorted(p for p in (run / "results").glob("*") if p.is_dir()):
        for stage in stages:
            base = ds / stage
            if base.is_dir():
                out += [str(p.relative_to(run)) for p in base.rglob("*.parquet")
                        if ".tmp" not in p.relative_to(run).parts]
    return sorted(out)


def _numeric(values: pd.Series) -> np.ndarray | None:
    """The column as float64 (lists of numbers flattened row by row), or None."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return None
    if pd.api.types.is_numeric_dtype(values.dtype):
        return values.to_numpy(dtype=np.float64, na_value=np.nan)[:, None]
    first = next((v for v in values if v is not None), None)
    if isinstance(first, (list, tuple, np.ndarray)):
        try:
            rows = [np.asarray(v if v is not None else [], dtype=np.float64).ravel()
                    for v in values]
        except (TypeError, ValueError):
            return None
        width = {len(r) for r in rows}
        if len(width) == 1:
            return np.stack(rows) if rows else np.zeros((0, 0))
    return None


def _text(values: pd.Series) -> np.ndarray:
    """The column as strings, every missing value (None, NaN, NA) spelled ``<NA>``."""
    def one(v: object) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            return "<NA>"
        return str(v.tolist() if isinstance(v, np.ndarray) else v)
    return np.array([one(v) for v in values.tolist()], dtype=object)


def _cell_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| per element; 0 where both are NaN or the same infinity, inf where only one
    side is NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
    same = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
    diff[same] = 0.0
    diff[np.isnan(a) != np.isnan(b)] = np.inf
    return diff


def compare_frames(name: str, a: pd.DataFrame, b: pd.DataFrame, tol: float,
                   out: Comparison) -> None:
    """Compare two tables cell by cell (rows by position); add what is found to ``out``."""
    if list(a.columns) != list(b.columns):
        out.problems.append(f"{name}: columns differ: {sorted(set(a.columns) ^ set(b.columns))}"
                            if set(a.columns) != set(b.columns) else
                            f"{name}: column order differs")
        return
    if len(a) != len(b):
        out.problems.append(f"{name}: {len(a)} rows vs {len(b)}")
        return
    n_values, worst, n_bad = 0, 0.0, 0
    for col in a.columns:
        x, y = _numeric(a[col]), _numeric(b[col])
        if x is not None and y is not None and x.shape == y.shape:
            diff = _cell_diff(x, y)
            scale = np.maximum(1.0, np.maximum(np.abs(np.nan_to_num(x)),
                                               np.abs(np.nan_to_num(y))))
            bad = diff > tol * scale
            n_values += diff.size
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0,
                        np.inf if np.isinf(diff).any() else 0.0)
            rows = np.flatnonzero(bad.any(axis=1))
            n_bad += len(rows)
            row_diff = np.where(bad, diff, -1.0)[rows]
            for i in np.argsort(-row_diff.max(axis=1), kind="stable")[:KEEP]:
                r, k = int(rows[i]), int(np.argmax(row_diff[i]))
                out.cells.append(Cell(name, col, r, x[r, k], y[r, k], float(diff[r, k])))
        else:
            sa, sb = _text(a[col]), _text(b[col])
            n_values += len(sa)
            rows = np.flatnonzero(sa != sb)
            n_bad += len(rows)
            worst = np.inf if len(rows) else worst
            out.cells += [Cell(name, col, int(r), sa[r], sb[r], np.inf) for r in rows[:KEEP]]
    out.tables += 1
    out.beyond += n_bad
    out.values += n_values
    out.max_diff = max(out.max_diff, worst)
    out.per_table.append((name, n_values, worst, n_bad))


def compare_runs(run_a: Path, run_b: Path, tol: float = TOL,
                 stages: tuple[str, ...] = METRIC_STAGES,
                 newer_than: Path | None = None) -> Comparison:
    """Every metric table of ``run_a`` against the same file of ``run_b``; with
    ``newer_than``, a table of ``run_b`` not newer than that file is a problem."""
    out = Comparison()
    ta, tb = metric_tables(run_a, stages), metric_tables(run_b, stages)
    if newer_than is not None:
        since = os.path.getmtime(newer_than)
        stale = [n for n in tb if os.path.getmtime(run_b / n) <= since]
        out.problems += [f"{n}: not recomputed in {run_b} (not newer than {newer_than})"
                         for n in stale]
    if not ta:
        out.problems.append(f"{run_a}: no metric tables under results/*/{{{','.join(stages)}}}")
    for name in sorted(set(ta) ^ set(tb)):
        out.problems.append(f"{name}: only in {run_a if name in ta else run_b}")
    for name in sorted(set(ta) & set(tb)):
        compare_frames(name, read_parquet(run_a / name), read_parquet(run_b / name), tol, out)
    return out


def stage_times(run: Path) -> pd.DataFrame:
    """Jobs, summed job seconds and span (first start to last end) per stage."""
    rows = []
    for tsv in sorted(run.glob("results/*/runtime/**/*.tsv")):
        rel = tsv.relative_to(next(p for p in tsv.parents if p.name == "runtime"))
        stage = "/".join(rel.parts[:-1]) or rel.stem
        secs = pd.read_csv(tsv, sep="\t")["s"].astype(float)
        end = os.path.getmtime(tsv)
        rows += [(stage, s, end - s, end) for s in secs]
    if not rows:
        return pd.DataFrame(columns=["jobs", "job_s", "span_s"])
    df = pd.DataFrame(rows, columns=["stage", "s", "start", "end"])
    g = df.groupby("stage", sort=True)
    return pd.DataFrame({"jobs": g.size(), "job_s": g["s"].sum(),
                         "span_s": g["end"].max() - g["start"].min()})


def times_table(run_a: Path, run_b: Path, labels: tuple[str, str]) -> str:
    """The two runs' stage times side by side, with the span ratio a / b."""
    ta, tb = stage_times(run_a), stage_times(run_b)
    both = ta.add_suffix("_a").join(tb.add_suffix("_b"), how="outer")
    la, lb = labels
    lines = [f"{'stage':<28}{'jobs':>5}{la + ' job s':>12}{la + ' span s':>13}"
             f"{lb + ' job s':>12}{lb + ' span s':>13}{'span ' + la + '/' + lb:>14}"]
    for stage, r in both.iterrows():
        ratio = r["span_s_a"] / r["span_s_b"] if r["span_s_b"] > 0 else np.nan
        jobs = r["jobs_a"] if pd.notna(r["jobs_a"]) else r["jobs_b"]
        lines.append(f"{stage:<28}{jobs:>5.0f}{r['job_s_a']:>12.1f}{r['span_s_a']:>13.1f}"
                     f"{r['job_s_b']:>12.1f}{r['span_s_b']:>13.1f}{ratio:>14.2f}")
    lines.append(f"{'all stages (job seconds)':<28}{len(ta) and ta['jobs'].sum():>5}"
                 f"{ta['job_s'].sum():>12.1f}{'':>13}{tb['job_s'].sum():>12.1f}")
    return "\n".join(lines)


def report(cmp: Comparison, labels: tuple[str, str], tol: float, worst: int = 15) -> str:
    """Per-table maxima, the worst cells and the PASS/FAIL line."""
    lines = [f"{'table':<70}{'values':>9}{'max |diff|':>12}{'beyond':>8}"]
    for name, n, mx, bad in cmp.per_table:
        lines.append(f"{name:<70}{n:>9}{mx:>12.2e}{bad:>8}")
    lines += [f"PROBLEM {p}" for p in cmp.problems]
    for c in sorted(cmp.cells, key=lambda c: -c.diff)[:worst]:
        lines.append(f"BEYOND {c.table} [{c.column}] row {c.row}: {labels[0]} {c.a!r} "
                     f"{labels[1]} {c.b!r} (|diff| {c.diff:.3g})")
    verdict = "PASS" if cmp.ok else "FAIL"
    lines.append(f"metrics {labels[0]} vs {labels[1]} within {tol:g}: {verdict} "
                 f"({cmp.values} values in {cmp.tables} tables, max |diff| "
                 f"{cmp.max_diff:.3g}, {cmp.beyond} cells beyond, "
                 f"{len(cmp.problems)} file problems)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path, help="working directory of the reference run (CPU)")
    ap.add_argument("run_b", type=Path, help="working directory of the other run (GPU)")
    ap.add_argument("--labels", default="cpu,gpu", help="names of the two runs")
    ap.add_argument("--tol", type=float, default=TOL, help="tolerance (see the docstring)")
    ap.add_argument("--stages", default=",".join(METRIC_STAGES),
                    help="folders of results/<ds>/ whose tables are compared")
    ap.add_argument("--newer-than", type=Path, default=None,
                    help="every metric table of run_b must be newer than this file")
    args = ap.parse_args(argv)
    la, lb = (args.labels.split(",") + ["b"])[:2]
    print(times_table(args.run_a, args.run_b, (la, lb)), flush=True)
    cmp = compare_runs(args.run_a, args.run_b, args.tol, tuple(args.stages.split(",")),
                       args.newer_than)
    print(report(cmp, (la, lb), args.tol))
    return 0 if cmp.ok else 1


if __name__ == "__main__":
    sys.exit(main())
