"""C11 mining's scoring: cosine scores of candidate pairs, which are in the band, and the band.

Rows of the reference model's L2-normalised embeddings are gathered into reused buffers
(:class:`RowGather`) and scored in batched float32 matrix products; scores within
:data:`EDGE` of a band edge are decided on exact float64 scores (:func:`settle_band`), so the
same config gives the same pairs on a CPU and a GPU. :func:`within_identity_scores` scores
the genuine candidates of whole identities, :func:`random_impostor_scores` a uniform sample
of impostor pairs, and :func:`estimate_band` turns a quantile band into an absolute one.
"""

from __future__ import annotations

import numpy as np
import torch

from facecast.analysis.mining_config import MiningConfig


def identity_groups(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, sizes)``: rows of identity ``g`` are ``order[starts[g]:][:sizes[g]]``."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) \
        if len(codes) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(codes)]).astype(np.int64)
    return order, starts, sizes


class RowGather:
    """Gathers rows of ``emb`` into reused buffers (one per ``slot``).

    Fancy indexing allocates a fresh tensor per call, and fresh multi-MB allocations cost
    page faults on every call; ``index_select`` into a kept buffer does not.
    """

    def __init__(self, emb: torch.Tensor) -> None:
        self.emb = emb
        self._buffers: dict[str, torch.Tensor] = {}

    def __call__(self, idx: torch.Tensor, slot: str = "rows") -> torch.Tensor:
        n = int(idx.numel())
        buf = self._buffers.get(slot)
        if buf is None or buf.shape[0] < n:
            buf = torch.empty((n, self.emb.shape[1]), dtype=self.emb.dtype, device=self.emb.device)
            self._buffers[slot] = buf
        return torch.index_select(self.emb, 0, idx, out=buf[:n])


#: float32 scores this close to a band edge are decided on exact (float64) scores
EDGE = 1e-4
#: bytes of each float64 row buffer of :func:`exact_scores`: a chunk of pairs is as many
#: rows as fit, so wide embeddings (raw LBP: 5,782 dims) take fewer rows per chunk
EXACT_BUFFER_BYTES = 1 << 22


def exact_scores(emb: torch.Tensor, a: np.ndarray, b: np.ndarray, *, chunk: int = 8192,
                 gather: RowGather | None = None) -> np.ndarray:
    """Cosine of rows ``a`` and ``b`` of ``emb`` in float64 (the same on every device).

    Works at most ``chunk`` pairs at a time, and no more than fill a 4 MiB float64 buffer
    (:data:`EXACT_BUFFER_BYTES`); the two buffers are reused across chunks, so memory stays
    small and bounded for any number of pairs and any width (fresh float64 copies of 8,192
    raw LBP rows were 380 MB each, and their page faults cost most of a mining job).
    """
    gather = gather or RowGather(emb)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    out = np.zeros(len(a), np.float64)
    dim = max(int(emb.shape[1]), 1)
    rows = max(1, min(int(chunk), EXACT_BUFFER_BYTES // (8 * dim)))
    buf_a, buf_b = (torch.empty((min(rows, len(a)), emb.shape[1]), dtype=torch.float64,
                                device=emb.device) for _ in range(2))
    for s in range(0, len(a), rows):
        ea = gather(torch.as_tensor(a[s:s + rows], device=emb.device), "a")
        eb = gather(torch.as_tensor(b[s:s + rows], device=emb.device), "b")
        xa, xb = buf_a[:len(ea)], buf_b[:len(eb)]
        xa.copy_(ea)
        xb.copy_(eb)
        out[s:s + len(ea)] = xa.mul_(xb).sum(1).cpu().numpy()
    return out


def settle_band(emb: torch.Tensor, a: np.ndarray, b: np.ndarray, s: np.ndarray, lo: float,
                hi: float) -> np.ndarray:
    """Mask of the candidates (float32 scores ``s`` within ``EDGE`` of the band) in band.

    Candidates near an edge are decided on their exact scores, so whether a pair is in
    band does not depend on how the device rounded its matrix product: the same config
    gives the same pairs on a CPU and a GPU (their float32 ``ref_score`` may differ in the
    last digit).
    """
    near = (s < lo + EDGE) | (s > hi - EDGE)
    keep = ~near
    if near.any():
        exact = exact_scores(emb, a[near], b[near])
        keep[near] = (exact >= lo) & (exact <= hi)
    return keep


def within_identity_scores(emb: torch.Tensor, order: np.ndarray, starts: np.ndarray,
                           sizes: np.ndarray, lo: float, hi: float, *,
                           keep_all_scores: bool = False, chunk_rows: int = 16_384,
                           gather: RowGather | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Score every within-identity pair of the identities given by ``starts``/``sizes``.

    Returns the in-band pairs ``(a, b, score)`` (row indices of ``emb``, ``a < b``; band
    edges settled by :func:`settle_band`), the number of pairs scored and, with
    ``keep_all_scores``, every score in float64 (else an empty array). Identities are
    batched by image count ``k``: each chunk of a size class is one ``[c, k, D]`` batched
    matrix product.
    """
    gather = gather or RowGather(emb)
    out_a, out_b, out_s, every = [], [], [], []
    total = 0
    for k in np.unique(sizes[sizes >= 2]):
        grp = starts[sizes == k]
        members = order[grp[:, None] + np.arange(k)[None, :]]          # [n_ids, k]
        members.sort(axis=1)
        iu, ju = np.triu_indices(k, 1)
        iu_t = torch.as_tensor(iu, device=emb.device)
        ju_t = torch.as_tensor(ju, device=emb.device)
        step = max(1, chunk_rows // k)
        for s in range(0, len(members), step):
            mem_t = torch.as_tensor(members[s:s + step], device=emb.device)
            e = gather(mem_t.reshape(-1)).view(len(mem_t), k, -1)
            if keep_all_scores:
                e = e.double()
            g = torch.bmm(e, e.transpose(1, 2))[:, iu_t, ju_t]            # [c, n_pairs]
            total += g.numel()
            if keep_all_scores:
                every.append(g.reshape(-1).cpu().numpy())
            r, c = torch.nonzero((g >= lo - EDGE) & (g <= hi + EDGE), as_tuple=True)
            if r.numel():
                sc = g[r, c].float().cpu().numpy()
                a, b = mem_t[r, iu_t[c]].cpu().numpy(), mem_t[r, ju_t[c]].cpu().numpy()
                keep = settle_band(emb, a, b, sc, lo, hi)
                out_s.append(sc[keep])
                out_a.append(a[keep])
                out_b.append(b[keep])
    z = np.zeros(0, np.int64)
    return (np.concatenate(out_a) if out_a else z, np.concatenate(out_b) if out_b else z,
            np.concatenate(out_s) if out_s else np.zeros(0, np.float32), total,
            np.concatenate(every) if every else np.zeros(0, np.float64))


def random_impostor_scores(emb: torch.Tensor, codes: np.ndarray, n: int,
                           rng: np.random.Generator) -> np.ndarray:
    """Scores (float64) of ``n`` uniformly drawn different-identity pairs (fewer if the pool
    is tiny)."""
    N = len(codes)
    if N < 2 or codes.min() == codes.max():
        return np.zeros(0, np.float32)
    a = rng.integers(0, N, size=2 * n)
    b = rng.integers(0, N, size=2 * n)
    keep = codes[a] != codes[b]
    return exact_scores(emb, a[keep][:n], b[keep][:n])


def estimate_band(e: torch.Tensor, codes: np.ndarray, cfg: MiningConfig,
                  imp_sample: np.ndarray) -> tuple[float, float, str]:
    """The absolute band ``(lo, hi, note)``; quantile bands are read off the subset's scores.

    ``note`` is non-empty when a quantile band cannot be estimated (then ``lo > hi``: an
    empty band that selects nothing).
    """
    lo, hi = cfg.band
    if cfg.band_mode == "absolute":
        return float(lo), float(hi), ""
    if cfg.band_mode == "genuine_quantile":
        sample = within_identity_scores(e, *identity_groups(codes), 1.0, -1.0,
                                        keep_all_scores=True)[4]
    else:
        sample = imp_sample
    if len(sample) == 0:
        kind = cfg.band_mode.split("_")[0]
        return float("inf"), float("-inf"), \
            f"no {kind} pairs in the subset to estimate the quantile band from"
    # rounded, so float64 summation-order noise (CPU vs GPU) cannot move the band
    lo, hi = (round(float(q), 12) for q in np.quantile(sample, cfg.band))
    return lo, hi, ""
