"""1:N identification of IJB templates (insightface ``ijb_1n.py``'s protocol).

Galleries ``G1`` and ``G2`` (``<variant>_1N_gallery_G1/G2.csv``) and the mixed-media
probes (``<variant>_1N_probe_mixed.csv``) are templates pooled exactly as for 1:1. Each
probe is searched against G1, against G2 (open set: a probe whose subject is not in the
gallery is a non-mated search) and against G1+G2 (closed set). A probe's mate rank is
1 + the number of gallery subjects whose best template scores higher than the subject's
own best template (subject-level ranks; IJB galleries hold one template per subject, so
this is the template rank). CMC and FNIR at FPIR come from
:mod:`facecast.identification.metrics`; TPIR = 1 - FNIR at rank 1. A target FPIR with
fewer than 1/FPIR non-mated searches is not resolvable (``n/a``), as there. With the
templates' demographic groups each probe group gets its own rows (the thresholds stay
those of all non-mated searches, as the identification stage sets them per group).

Templates without a feature count by the one failure rule (``templates.failed``, an alias
of ``evaluate.failed``; :mod:`facecast.identification.misses` for images): under
``nonmatch`` a probe without one is searched and misses - a mated probe at every rank,
a non-mated one returns no candidate - and a mated probe whose subject's gallery
templates all lack one misses too; under ``drop`` they leave the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.failures import DEFAULT_RULE, FAILED_SCORE, check_rule
from facecast.identification.metrics import cmc, fnir_at_fpir


def subject_ranks(probe_feats: np.ndarray, probe_subjects: np.ndarray,
                  gallery_feats: np.ndarray, gallery_subjects: np.ndarray, *,
                  block: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per probe: mate rank (0 = subject not in the gallery), mate score (the subject's
    best template; NaN when non-mated) and the best score of another subject."""
    subj, g_code = np.unique(np.asarray(gallery_subjects).astype(str), return_inverse=True)
    p_code = pd.Index(subj).get_indexer(np.asarray(probe_subjects).astype(str))
    n_p, n_s = len(p_code), len(subj)
    rank = np.zeros(n_p, np.int64)
    mate_score = np.full(n_p, np.nan)
    other_best = np.full(n_p, -np.inf)
    g = np.asarray(gallery_feats, np.float64)
    for s0 in range(0, n_p, block):
        sc = np.asarray(probe_feats[s0:s0 + block], np.float64) @ g.T
        best = np.full((len(sc), n_s), -np.inf)  # best template score per subject
        if n_s == len(g_code):  # one template per subject (IJB's galleries)
            best[:, g_code] = sc
        else:
            np.maximum.at(best.T, g_code, sc.T)
        code = p_code[s0:s0 + block]
        mated = code >= 0
        rows = np.flatnonzero(mated)
        ms = np.full(len(sc), np.nan)
        ms[rows] = best[rows, code[rows]]
        own = best.copy()
        own[rows, code[rows]] = -np.inf
        other_best[s0:s0 + len(sc)] = own.max(1) if n_s else -np.inf
        higher = (own > np.where(mated, ms, np.inf)[:, None]).sum(1)
        rank[s0:s0 + len(sc)] = np.where(mated, higher + 1, 0)
        mate_score[s0:s0 + len(sc)] = ms
    return rank, mate_score, other_best


def _rows(base: dict, rank: np.ndarray, ms: np.ndarray, nonmated_top: np.ndarray,
          ranks: Sequence[int], fpir_targets: Sequence[float]) -> list[dict]:
    """CMC and TPIR rows of one gallery and one probe group (the FPIR thresholds come from
    ``nonmated_top``: every non-mated search of the gallery, whatever its group)."""
    out = []
    n_mated = int((rank >= 1).sum())
    for k, v in zip(ranks, cmc(rank, ranks), strict=True):
        out.append({**base, "metric": f"rank_{int(k)}", "value": float(v),
                    "resolvable": bool(n_mated), "text": f"{v:.4f}" if n_mated else "n/a"})
    fn = fnir_at_fpir(rank, ms, nonmated_top, fpir_targets, rank=1)
    for r in fn.itertuples(index=False):
        tpir = 1.0 - r.fnir
        ok = bool(r.resolvable) and bool(n_mated) and np.isfinite(tpir)
        out.append({**base, "metric": f"tpir@fpir={r.target_fpir:g}", "value": tpir,
                    "resolvable": ok, "text": f"{tpir:.4f}" if ok else r.text})
    return out


def identification_table(templates: pd.DataFrame, features: np.ndarray,
                         protocol: Mapping[str, pd.DataFrame], *, ranks: Sequence[int],
                         fpir_targets: Sequence[float],
                         probe_groups: Mapping[int, str] | None = None,
                         failed: str = DEFAULT_RULE) -> pd.DataFrame:
    """Rows ``gallery`` (G1, G2, G1+G2) x ``group`` x ``metric`` (``rank_<k>``,
    ``tpir@fpir=<t>``): ``value``, ``text``, ``resolvable``, ``n_probes``, ``n_mated``,
    ``n_nonmated``, ``n_unscored`` (probe or gallery templates without features).

    ``group`` is ``all``, and with ``probe_groups`` (template id -> demographic group,
    :func:`facecast.templates.groups.template_groups`) each probe group: its CMC and its
    FNIR at the thresholds set by every non-mated search of the gallery. ``templates``:
    the templates table (``template_id``, ``status``) aligned with ``features``;
    ``protocol``: ``G1``, ``G2``, ``probe`` frames of ``template_id``, ``subject_id``
    (:func:`facecast.datasets.ijb.read_one_n_csv`). ``failed``: the failure rule (module
    docstring).
    """
    check_rule(failed)
    row_of = pd.Series(np.arange(len(templates)), index=templates["template_id"].to_numpy())
    ok_ids = set(templates.loc[templates["status"] == "ok", "template_id"].tolist())

    def usable(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
        keep = df["template_id"].isin(ok_ids)
        return df[keep], int((~keep).sum())

    probes, p_lost = usable(protocol["probe"])
    if failed == "nonmatch":
        probes = protocol["probe"]
    p_ok = probes["template_id"].isin(ok_ids).to_numpy()
    p_feats = features[row_of[probes.loc[p_ok, "template_id"]].to_numpy()]
    pg = None
    if probe_groups:
        pg = probes["template_id"].map(dict(probe_groups)).to_numpy(object)
    out = []
    galleries = {"G1": protocol["G1"], "G2": protocol["G2"],
                 "G1+G2": pd.concat([protocol["G1"], protocol["G2"]], ignore_index=True)}
    for name, whole in galleries.items():
        gal, g_lost = usable(whole)
        g_feats = features[row_of[gal["template_id"]].to_numpy()]
        rank, ms, other = _with_misses(
            subject_ranks(p_feats, probes.loc[p_ok, "subject_id"].to_numpy(), g_feats,
                          gal["subject_id"].to_numpy()),
            p_ok, probes["subject_id"].isin(
                (whole if failed == "nonmatch" else gal)["subject_id"]).to_numpy(),
            whole["subject_id"].nunique())
        nonmated_top = other[rank == 0]
        subsets = [("all", np.ones(len(rank), bool))]
        if pg is not None:
            subsets += [(str(g), pg == g) for g in sorted({x for x in pg if pd.notna(x)})]
        for group, m in subsets:
            n_mated = int((rank[m] >= 1).sum())
            base = {"gallery": name, "group": group, "n_probes": int(m.sum()),
                    "n_mated": n_mated, "n_nonmated": int(m.sum() - n_mated),
                    "n_unscored": p_lost + g_lost}
            out += _rows(base, rank[m], ms[m], nonmated_top, ranks, fpir_targets)
    cols = ["gallery", "group", "metric", "value", "text", "resolvable", "n_probes",
            "n_mated", "n_nonmated", "n_unscored"]
    return pd.DataFrame(out, columns=cols)


def _with_misses(found: tuple[np.ndarray, np.ndarray, np.ndarray], probe_ok: np.ndarray,
                 subject_enrolled: np.ndarray, n_subjects: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`subject_ranks` of the probes with a feature, spread over every probe: a
    probe without one, or one whose subject is enrolled but has no template with a
    feature, misses (rank ``n_subjects + 1``, mate score ``-inf``) when its subject is
    enrolled and returns no candidate (best other score ``-inf``) when not. Under ``drop``
    every probe has a feature and ``subject_enrolled`` names the featured gallery only, so
    nothing changes."""
    rank_ok, ms_ok, other_ok = found
    n = len(probe_ok)
    rank = np.zeros(n, np.int64)
    ms = np.full(n, np.nan)
    other = np.full(n, FAILED_SCORE)
    rank[probe_ok], ms[probe_ok], other[probe_ok] = rank_ok, ms_ok, other_ok
    miss = subject_enrolled & (rank == 0)
    rank[miss], ms[miss] = n_subjects + 1, FAILED_SCORE
    return rank, ms, other
