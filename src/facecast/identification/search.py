"""1:N search: blocked score matrix with a running top-k per probe (torch, GPU if present).

Scores are cosine similarities of L2-normalised embeddings. The probe x gallery matrix is
never held whole: probes go in blocks, the gallery in blocks, and each probe keeps the k
best candidates seen so far (``torch.topk`` on the block joined with the running list;
no full sort). For mated probes the search also returns the mate's score and its rank,
``1 + #{other gallery entries scoring strictly higher than the mate}`` (ties count in
the probe's favour). By default the rank is read off the final top-k list (every entry
scoring above a mate that lies within the top k is itself in the top k), so a rank beyond
``k`` is censored to ``k + 1`` ("not in the candidate list") - enough for CMC up to rank k
and FNIR(N, R, T) for R <= k; ``exact_rank=True`` counts it over every block instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm


@dataclass
class SearchResult:
    """Per probe: top-k gallery indices and scores (best first), the mate's score and rank
    (NaN / 0 for non-mated probes)."""

    top_index: np.ndarray   # (P, k) int64
    top_score: np.ndarray   # (P, k) float32
    mate_score: np.ndarray  # (P,) float32
    mate_rank: np.ndarray   # (P,) int64, 0 = no mate, k + 1 = beyond the top k


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def search(probes: np.ndarray, gallery: np.ndarray, mate: np.ndarray, *, k: int = 20,
           probe_block: int = 2048, gallery_block: int = 16384, device: str = "auto",
           exact_rank: bool = False, precision: str = "float32",
           progress: bool = False) -> SearchResult:
    """Top-``k`` candidates of every probe and its mate's rank (see the module docstring).

    ``mate``: per probe the gallery row of its identity, or -1 for a non-mated probe.
    ``exact_rank``: count the mate's rank over the whole gallery (one more pass over every
    block); by default ranks beyond ``k`` are censored to ``k + 1``.
    ``precision``: ``float32`` (exact) or ``bfloat16`` (an approximation for speed on CPUs
    with bf16 units: blocks in bf16 keep ``k + 16`` candidates, which are re-scored in
    float32; a true top-k entry outside those candidates is missed, and ranks beyond the
    list come from the re-scored candidates). Memory: one ``probe_block x gallery_block``
    block plus the running lists.
    """
    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"precision must be float32 or bfloat16, got {precision!r}")
    if precision == "bfloat16" and exact_rank:
        raise ValueError("exact_rank needs precision float32")
    dev = resolve_device(device)
    p = torch.from_numpy(normalise(probes))
    g = torch.from_numpy(normalise(gallery)).to(dev)
    mate_t = torch.from_numpy(np.asarray(mate, dtype=np.int64))
    n_p, n_g = p.shape[0], g.shape[0]
    k = max(1, min(int(k), n_g)) if n_g else 0
    low = precision == "bfloat16"
    kc = min(k + 16, n_g) if low else k  # candidates kept per probe
    g_mm = g.to(torch.bfloat16) if low else g
    top_i = np.zeros((n_p, k), np.int64)
    top_s = np.zeros((n_p, k), np.float32)
    m_score = np.full(n_p, np.nan, np.float32)
    m_rank = np.zeros(n_p, np.int64)
    if n_p == 0 or n_g == 0:
        return SearchResult(top_i, top_s, m_score, m_rank)
    starts = range(0, n_p, probe_block)
    for s0 in tqdm(starts, desc="probe blocks", disable=not progress, mininterval=5):
        pb = p[s0:s0 + probe_block].to(dev)
        mb = mate_t[s0:s0 + probe_block].to(dev)
        has = mb >= 0
        ms = torch.full((pb.shape[0],), float("nan"), device=dev)
        if bool(has.any()):
            ms[has] = (pb[has] * g[mb[has]]).sum(1)
        pb_mm = pb.to(torch.bfloat16) if low else pb
        best_s = torch.full((pb.shape[0], kc), -float("inf"), device=dev, dtype=g_mm.dtype)
        best_i = torch.zeros((pb.shape[0], kc), dtype=torch.long, device=dev)
        higher = torch.zeros(pb.shape[0], dtype=torch.long, device=dev)
        for g0 in range(0, n_g, gallery_block):
            block = pb_mm @ g_mm[g0:g0 + gallery_block].T
            if exact_rank:
                higher += (block > ms[:, None]).sum(1)  # NaN mate -> all False
                # the mate's own cell never outranks it (the matmul may round it 1 ulp up)
                inb = has & (mb >= g0) & (mb < g0 + block.shape[1])
                if bool(inb.any()):
                    rows = torch.nonzero(inb).squeeze(1)
                    own = block[rows, mb[rows] - g0]
                    higher[rows] -= (own > ms[rows]).long()
            kk = min(kc, block.shape[1])
            bs, bi = torch.topk(block, kk, dim=1)
            cat_s = torch.cat([best_s, bs], dim=1)
            cat_i = torch.cat([best_i, bi + g0], dim=1)
            best_s, pos = torch.topk(cat_s, kc, dim=1)
            best_i = torch.gather(cat_i, 1, pos)
            del block
        if low:  # re-score the candidates in float32, keep the best k
            exact = torch.einsum("pd,pkd->pk", pb, g[best_i])
            best_s, pos = torch.topk(exact, k, dim=1)
            best_i = torch.gather(best_i, 1, pos)
        if not exact_rank:
            # every entry scoring above a mate within the top k is itself in the top k
            higher = ((best_s > ms[:, None]) & (best_i != mb[:, None])).sum(1)
            higher = torch.where(higher >= k, torch.full_like(higher, k), higher)
        e = s0 + pb.shape[0]
        top_s[s0:e] = best_s.cpu().numpy()
        top_i[s0:e] = best_i.cpu().numpy()
        m_score[s0:e] = ms.cpu().numpy()
        m_rank[s0:e] = np.where(has.cpu().numpy(), higher.cpu().numpy() + 1, 0)
    return SearchResult(top_i, top_s, m_score, m_rank)
