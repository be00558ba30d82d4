"""The table's identity-clustered bootstrap: every method's point estimates and replicates.

A replicate draws the evaluated identities with replacement
(:func:`facecast.evaluate.resample.identity_counts`, one seeded stream); a genuine pair
weighs its identity's count, an impostor pair the product of its two identities' counts.
Every method reads the same draws (each method's pass regenerates them from the seed: the
same numbers), so every difference to raw is paired. A method's figures come from its
:class:`facecast.mitigation.metrics.MethodState`, one batch of :data:`BATCH` replicates
per pass.

Large tables run their methods in worker processes (:func:`facecast.parallel.
process_pool`; NumPy's per-block operations hold the GIL too often for threads to help):
``workers`` processes when ``pairs x (replicates + 1) x methods`` reaches
:data:`PROCESS_WORK`, each building its methods' states from the annotated pairs and
returning their figures - the same numbers as in one process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from facecast.evaluate.resample import identity_counts
from facecast.mitigation.metrics import MethodState
from facecast.mitigation.ranked import PairCodes
from facecast.parallel import process_pool

__all__ = ["BATCH", "PROCESS_WORK", "Point", "Reps", "bootstrap", "method_replicates"]

#: replicates per batch (a pass holds blocks of them: memory does not grow with it)
BATCH = 16
#: pair-replicates of a table from which its methods run in worker processes (below it, a
#: worker's start-up costs more than it saves)
PROCESS_WORK = 2_000_000_000
#: the annotated columns a method's state reads
ANN_COLUMNS = ("identity_a", "identity_b", "label", "group", "combo", "status", "in_cells",
               "in_reference", "eval_fold")

#: per method and metric: a point estimate / its bootstrap replicates
Point = dict[str, dict[str, float]]
Reps = dict[str, dict[str, np.ndarray]]


def method_replicates(state: MethodState, n_boot: int, seed: int
                      ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """One method's point estimates and ``n_boot`` replicates (seeded draws)."""
    codes = state.codes
    point = {k: float(v[0]) for k, v in
             state.metrics(np.ones((1, codes.k)), point=True).items()}
    parts = [state.metrics(c) for c in identity_counts(
        codes.k, n_boot, np.random.default_rng(int(seed)), BATCH)]
    return point, {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0)
                   for k in point}


def _task(args: tuple[Any, ...]) -> tuple[list[str], dict[str, float], dict[str, np.ndarray]]:
    """A worker's method: its state built from the annotated pairs, then its figures."""
    ann, score, prob, kw, n_boot, seed = args
    codes = PairCodes(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy())
    st = MethodState(ann, score, prob, codes=codes, **kw)
    return st.groups, *method_replicates(st, n_boot, seed)


def _compact(ann: pd.DataFrame) -> pd.DataFrame:
    """The columns a state reads, text as categories (what a worker receives)."""
    out = ann[list(ANN_COLUMNS)].copy()
    for c in ("identity_a", "identity_b", "group", "combo", "status", "eval_fold"):
        out[c] = out[c].astype("category")
    return out


def bootstrap(ann: pd.DataFrame, scores: Mapping[str, np.ndarray],
              probs: Mapping[str, np.ndarray], *, fars: Sequence[float], fmr: float,
              fairness: Mapping[str, Any], n_boot: int, seed: int, workers: int = 1
              ) -> tuple[list[str], Point, Reps]:
    """``(fairness groups, point, replicates)`` of every method of ``scores`` (in its
    order) on the annotated evaluated pairs ``ann``: per method and metric the point
    estimate and ``n_boot`` replicates of one seeded identity draw per replicate."""
    kw = {"fars": list(fars), "fmr": float(fmr), "fairness": dict(fairness)}
    names = list(scores)
    work = len(ann) * (int(n_boot) + 1) * len(names)
    if int(workers) > 1 and len(names) > 1 and work >= PROCESS_WORK:
        small = _compact(ann)
        tasks = [(small, scores[m], probs[m], kw, n_boot, seed) for m in names]
        with process_pool(min(int(workers), len(names))) as pool:
            done = list(tqdm(pool.map(_task, tasks), total=len(names), desc="methods"))
    else:
        codes = PairCodes(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy())
        done = []
        for m in tqdm(names, desc="methods", mininterval=5):
            st = MethodState(ann, scores[m], probs[m], codes=codes, **kw)
            done.append((st.groups, *method_replicates(st, n_boot, seed)))
    groups = done[0][0] if done else []
    return (groups, {m: d[1] for m, d in zip(names, done, strict=True)},
            {m: d[2] for m, d in zip(names, done, strict=True)})
