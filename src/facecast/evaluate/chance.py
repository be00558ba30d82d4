"""Accuracy next to what chance gives (issue 50, item 3).

A protocol of 28 genuine and 146 impostor pairs is scored 84 % by rejecting every pair: a
random network's 90 % 10-fold accuracy there says little. So every accuracy table shows
the genuine and impostor counts and the accuracy of always giving the majority answer
(:func:`chance_accuracy`: always "different" where impostors outnumber genuine pairs), and
the model's margin over it; where the classes are imbalanced (:func:`imbalanced`: the
majority class holds more than :data:`IMBALANCE_SHARE` of the pairs) the summary leads
with AUC and TAR@FAR, which no constant answer scores well on (AUC 0.5, TAR 0). Pairs
held out of the 10-fold test (the protocol's ``val`` fold) are counted on the page
(:func:`held_out_text`: ``16 of 190 pairs held out (val)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["IMBALANCE_SHARE", "chance_accuracy", "chance_lines", "constant_answer",
           "held_out_text", "imbalanced", "lead_lines"]

#: the majority class's share of the pairs above which the classes count as imbalanced
IMBALANCE_SHARE = 0.6


def chance_accuracy(n_genuine: float, n_impostor: float) -> float:
    """Accuracy of always giving the majority answer: ``max(G, I) / (G + I)`` (NaN with
    no pair)."""
    n = float(n_genuine) + float(n_impostor)
    return max(float(n_genuine), float(n_impostor)) / n if n > 0 else float("nan")


def constant_answer(n_genuine: float, n_impostor: float) -> str:
    """The constant answer :func:`chance_accuracy` gives: ``"different"`` (reject every
    pair) unless genuine pairs outnumber impostors (``"same"``)."""
    return "same" if float(n_genuine) > float(n_impostor) else "different"


def imbalanced(n_genuine: float, n_impostor: float) -> bool:
    """Whether the majority class holds more than :data:`IMBALANCE_SHARE` of the pairs."""
    c = chance_accuracy(n_genuine, n_impostor)
    return bool(np.isfinite(c) and c > IMBALANCE_SHARE)


def held_out_text(n_held_out: int, n_total: int, folds: str = "val") -> str:
    """``16 of 190 pairs held out (val)``."""
    return f"{int(n_held_out)} of {int(n_total)} pairs held out ({folds})"


def _rows(long: pd.DataFrame, benchmarks: Sequence[str]) -> pd.DataFrame:
    """One row per benchmark with counts (the first model's: every model reads the same
    protocol)."""
    cols = [c for c in ("benchmark", "n_genuine", "n_impostor", "n_held_out",
                        "n_protocol_pairs") if c in long.columns]
    first = long[cols].drop_duplicates("benchmark").set_index("benchmark")
    return first.reindex(list(benchmarks))


def _pct(v: float) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{100 * v:.2f}"


def chance_lines(long: pd.DataFrame, benchmarks: Sequence[str], models: Sequence[str]
                 ) -> list[str]:
    """The table beside the 10-fold accuracy: per benchmark the genuine and impostor pairs,
    the pairs held out, the accuracy of the constant answer, and each model's accuracy
    minus it (points; ≤ 0: no better than chance)."""
    if "n_genuine" not in long.columns:
        return []
    rows = _rows(long, benchmarks)
    head = ["benchmark", "genuine", "impostor", "held out", "constant answer",
            "its accuracy (%)", *[f"{m} - it (points)" for m in models]]
    lines = ["", "### Accuracy beside chance", "",
             "The accuracy of always giving the majority answer (\"different\": reject every "
             "pair, where impostors outnumber genuine pairs) and each model's margin over it "
             "(≤ 0: no better than chance). Balanced by design only where genuine and "
             "impostor pairs are as many.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in benchmarks:
        g, i = rows.loc[b, "n_genuine"], rows.loc[b, "n_impostor"]
        if pd.isna(g) or pd.isna(i):
            lines.append(f"| {b} | – | – | – | – | – |" + " – |" * len(models))
            continue
        c = chance_accuracy(g, i)
        held = held_out_cell(rows, b)
        cells = [b, str(int(g)), str(int(i)), held, constant_answer(g, i), _pct(c)]
        for m in models:
            a = long.loc[(long["model"] == m) & (long["benchmark"] == b), "accuracy"]
            v = float(a.iloc[0]) if len(a) else np.nan
            cells.append("–" if not np.isfinite(v) else f"{100 * (v - c):+.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def held_out_cell(rows: pd.DataFrame, bench: str) -> str:
    """``16 of 190 pairs held out (val)`` for one benchmark's counts, ``0`` with none,
    ``–`` where the metrics do not count them."""
    if "n_held_out" not in rows.columns or pd.isna(rows.loc[bench, "n_held_out"]):
        return "–"
    held = int(rows.loc[bench, "n_held_out"])
    total = held + int(rows.loc[bench, "n_protocol_pairs"])
    return held_out_text(held, total) if held else "0"


def lead_lines(long: pd.DataFrame, benchmarks: Sequence[str]) -> list[str]:
    """The summary's opening sentence where a benchmark's classes are imbalanced (then
    AUC and TAR@FAR come first); ``[]`` otherwise."""
    if "n_genuine" not in long.columns:
        return []
    rows = _rows(long, benchmarks)
    bad = [b for b in benchmarks if not pd.isna(rows.loc[b, "n_genuine"])
           and imbalanced(rows.loc[b, "n_genuine"], rows.loc[b, "n_impostor"])]
    if not bad:
        return []
    parts = [f"{b} ({int(rows.loc[b, 'n_genuine'])} genuine, "
             f"{int(rows.loc[b, 'n_impostor'])} impostor pairs: always answering "
             f"\"{constant_answer(rows.loc[b, 'n_genuine'], rows.loc[b, 'n_impostor'])}\" "
             f"scores {_pct(chance_accuracy(rows.loc[b, 'n_genuine'], rows.loc[b, 'n_impostor']))} %)"
             for b in bad]
    return [f"Imbalanced classes on {'; '.join(parts)}: AUC and TAR@FAR come first, the "
            "10-fold accuracy after them beside what chance gives."]
