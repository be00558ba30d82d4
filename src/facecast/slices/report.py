"""What a user reads of a slice search: the findings as one line each (HTML and terminal),
the benchmarks they export (``discovered.yaml``), the error-rate figure and the example
pairs of each finding.

Every number a line shows has its reason when it is missing: ``n/a (...)``.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import yaml

from facecast.evaluate.failures import FAILED_RULES, rule_text
from facecast.fairness.hardpairs import hardest_pairs
from facecast.report.figures import pyplot, save_figure
from facecast.slices.discover import threshold_text

#: columns of the slice table a report shows
SHOWN = ["error_type", "rank", "finding", "slice", "n_genuine", "n_impostor", "n_identities",
         "error_rate", "error_lo", "error_hi", "rest_rate", "effect", "p", "q", "fnmr", "fmr",
         "accuracy", "note"]
#: how the two error types are named in text
NAMES = {"fnmr": "FNMR", "fmr": "FMR"}
#: which pairs each error type judges
PAIRS = {"fnmr": "genuine", "fmr": "impostor"}


def _num(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def p_text(p: float) -> str:
    """A p- or q-value in 2 significant digits; one too small for a double: ``< 1e-300``."""
    return "< 1e-300" if p <= 1e-300 else _num(p, 2)


def rate_text(rate: float, lo: float, hi: float) -> str:
    """``rate [lo, hi]``; the interval ``n/a`` with its reason when missing."""
    if not np.isfinite(rate):
        return "n/a (no pair)"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{_num(rate)} [n/a (no bootstrap replicate)]"
    return f"{_num(rate)} [{_num(lo)}, {_num(hi)}]"


def also_seen(members: Sequence[str], shown: int = 2) -> str:
    """The first ``shown`` member slices and how many more."""
    members = list(members)
    if not members:
        return "(no other slice)"
    more = len(members) - shown
    return "; ".join(members[:shown]) + (f"; +{more} more" if more > 0 else "")


def finding_lines(findings: pd.DataFrame) -> pd.DataFrame:
    """One line per finding, as the report and the terminal print it."""
    rows = []
    for f in findings.itertuples(index=False):
        rows.append({
            "finding": f"{NAMES[f.error_type]} {f.finding}", "slice": f.slice,
            "pairs": f"{f.size} {PAIRS[f.error_type]}, {f.n_identities} ids",
            "error rate [95% CI]": rate_text(f.error_rate, f.error_lo, f.error_hi),
            "rest": _num(f.rest_rate), "q": p_text(f.q), "p beyond": p_text(f.p_beyond),
            "also seen as": also_seen(f.members)})
    return pd.DataFrame(rows, columns=["finding", "slice", "pairs", "error rate [95% CI]",
                                       "rest", "q", "p beyond", "also seen as"])


def terminal_table(frame: pd.DataFrame, widths: Mapping[str, int] | None = None) -> str:
    """``frame`` as a plain-text table; long cells wrap within their column's width."""
    widths = dict(widths or {})
    cols = list(frame.columns)
    cells = [[str(v) for v in row] for row in frame.itertuples(index=False)]
    width = {c: min(widths.get(c, 10 ** 6), max([len(c)] + [len(r[i]) for r in cells]))
             for i, c in enumerate(cols)}
    lines = ["  ".join(c.ljust(width[c]) for c in cols),
             "  ".join("-" * width[c] for c in cols)]
    for row in cells:
        wrapped = [textwrap.wrap(v, width[c]) or [""] for v, c in zip(row, cols, strict=True)]
        for k in range(max(len(w) for w in wrapped)):
            lines.append("  ".join((w[k] if k < len(w) else "").ljust(width[c])
                                   for w, c in zip(wrapped, cols, strict=True)).rstrip())
    return "\n".join(lines)


def summary_text(info: Mapping[str, Any]) -> str:
    """The search in one paragraph: threshold and why, pair rules, counts, the family."""
    by = info["by_error"]
    per = "; ".join(
        f"{NAMES[e]} over {c['n_relevant']} {PAIRS[e]} pairs (pair in a slice when "
        f"{info['pair'][e]} image{'s satisfy' if info['pair'][e] == 'both' else ' satisfies'}"
        f" it): {c['evaluated']} slices evaluated, {c['pruned']} pruned, {c['tested']} "
        f"tested, {c['significant']} significant, {c['findings']} findings"
        for e, c in by.items())
    failed = (f" {rule_text(info['failed'], int(info.get('n_failed', 0)))}"
              if info.get("failed") in FAILED_RULES else "")
    return (f"One threshold on all {info['n_pairs']} pairs: {threshold_text(info['threshold'])}"
            f". {per}. False-discovery rate {info['fdr']:g} ({info['fdr_method'].upper()}) "
            f"over one family of {info['family']} slices (every error type; slices not "
            f"tested, pruned ones included, count with p = 1).{failed}")


def bench_name(model: str, protocol: str, etype: str, finding: int) -> str:
    """The benchmark name of one exported finding."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"slice_{model}_{protocol}_{etype}_{finding}")


def discovered_yaml(findings: pd.DataFrame, info: Mapping[str, Any], *, model: str,
                    protocol: str) -> str:
    """One benchmark per finding, as a facecast config fragment (``benchmarks:``)."""
    head = [f"# Hard sub-benchmarks discovered by facecast slices: {model} on {protocol}",
            *("# " + line for line in textwrap.wrap(summary_text(info), 88)),
            "# Add to a run: snakemake --configfile <your config> <this file>",
            "# (rank filters rank over the benchmark pool, as the search did)."]
    benches: dict[str, Any] = {}
    for f in findings.itertuples(index=False):
        name = bench_name(model, protocol, f.error_type, int(f.finding))
        definition = f.definition if isinstance(f.definition, list) else json.loads(
            f.definition)
        benches[name] = {"filters": definition}
        head.append(f"#  {name}: {f.slice}: {NAMES[f.error_type]} "
                    f"{rate_text(f.error_rate, f.error_lo, f.error_hi)} vs "
                    f"{_num(f.rest_rate)}, q = {p_text(f.q)}")
    body = yaml.safe_dump({"benchmarks": benches}, sort_keys=False) if benches else \
        "benchmarks: {}\n"
    return "\n".join(head) + "\n" + body


def plot_findings(findings: pd.DataFrame, table: pd.DataFrame, info: Mapping[str, Any],
                  path: str, title: str, top: int) -> None:
    """Per error type, the findings' error rates with their intervals against the rest and
    the overall rate (no finding: the ``top`` lowest-p tested slices, analytic intervals)."""
    types = list(info["by_error"])
    plt = pyplot()
    shown = {e: _shown(findings, table, e, top) for e in types}
    heights = [1.2 + 0.45 * max(1, len(s)) for s in shown.values()]
    fig, axes = plt.subplots(len(types), 1, figsize=(9, sum(heights)), squeeze=False,
                             height_ratios=heights, constrained_layout=True)
    for ax, e in zip(axes[:, 0], types, strict=True):
        s = shown[e]
        y = np.arange(len(s))[::-1]
        if len(s):
            r = s["error_rate"].to_numpy(np.float64)
            err = [np.nan_to_num(r - s["error_lo"].to_numpy(np.float64)).clip(0),
                   np.nan_to_num(s["error_hi"].to_numpy(np.float64) - r).clip(0)]
            ax.errorbar(r, y, xerr=err, fmt="o", color="tab:red", capsize=3,
                        label="slice (95% interval)")
            ax.scatter(s["rest_rate"], y, marker="|", s=120, c="black", label="rest")
            ax.set_yticks(y, ["\n".join(textwrap.wrap(t, 60)) for t in s["label"]],
                          fontsize=7)
        else:
            ax.text(0.5, 0.5, "no slice tested", ha="center", transform=ax.transAxes)
        ax.axvline(info["by_error"][e]["mean_error"], color="tab:blue", ls="--", lw=1,
                   label="all pairs")
        ax.set_xlabel(f"{NAMES[e]} of {PAIRS[e]} pairs at t = "
                      f"{info['threshold']['threshold']:.4g}")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3, axis="x")
    axes[0, 0].set_title(title, fontsize=9)
    save_figure(fig, path)


def _shown(findings: pd.DataFrame, table: pd.DataFrame, etype: str, top: int
           ) -> pd.DataFrame:
    """The findings of ``etype`` (labelled), else its ``top`` lowest-p tested slices."""
    f = findings[findings["error_type"] == etype]
    if len(f):
        return f.assign(label=[f"{NAMES[etype]} {k}: {s}" for k, s in
                               zip(f["finding"], f["slice"], strict=True)])
    t = table[(table["error_type"] == etype) & table["tested"]].sort_values(
        "p", kind="stable").head(top)
    return t.assign(label=[f"(p = {p:.2g}) {s}" for p, s in
                           zip(t["p"], t["slice"], strict=True)])


def example_pairs(findings: pd.DataFrame, members: Sequence[np.ndarray],
                  pairs: pd.DataFrame, per_finding: int = 2) -> pd.DataFrame:
    """The hardest errors of each finding's kind (lowest-scoring genuine pairs for FNMR,
    highest-scoring impostor pairs for FMR) among its representative's pairs."""
    out = []
    for f, member in zip(findings.itertuples(index=False), members, strict=True):
        kind = PAIRS[f.error_type]
        hard = hardest_pairs(pairs.loc[member], per_finding)
        out.append(hard[hard["kind"] == kind].assign(
            group=f"{NAMES[f.error_type]} {f.finding}", slice=f.slice))
    cols = ["kind", "rank", "image_a", "image_b", "label", "score", "group", "slice"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def terminal_report(result: Any, top: int = 10) -> str:
    """What ``facecast slices`` prints: the search in words, the findings table, then each
    error type's ``top`` slices (``result``: :class:`facecast.slices.discover.SliceSearch`)."""
    info, findings, table = result.info, result.findings, result.table
    parts = [textwrap.fill(summary_text(info), 100), ""]
    if len(findings):
        parts += ["Findings (distinct effects, most important first):",
                  terminal_table(finding_lines(findings),
                                 {"slice": 44, "also seen as": 36, "pairs": 14,
                                  "error rate [95% CI]": 22}), ""]
    else:
        parts += ["No finding: no slice is significant at the false-discovery rate.", ""]
    for etype in info["by_error"]:
        t = table[table["error_type"] == etype]
        rows = t[t["rank"].notna()].head(top)
        head = f"{NAMES[etype]}: the {len(rows)} best ranked slices" if len(rows) else (
            f"{NAMES[etype]}: no significant slice; the lowest p")
        if rows.empty:
            rows = t[t["tested"]].sort_values("p", kind="stable").head(top)
        lines = pd.DataFrame({
            "rank": [str(r) if pd.notna(r) else "-" for r in rows["rank"]],
            "finding": [str(f) if pd.notna(f) else "-" for f in rows["finding"]],
            "slice": rows["slice"],
            "rate [95% CI]": [rate_text(r, lo, hi) for r, lo, hi in
                              zip(rows["error_rate"], rows["error_lo"], rows["error_hi"],
                                  strict=True)],
            "rest": [_num(x) for x in rows["rest_rate"]],
            "q": [p_text(x) for x in rows["q"]]})
        parts += [head + ":", terminal_table(lines, {"slice": 56}), ""]
    return "\n".join(parts)
