"""The inputs the insightface and cc11 records of the ``.bin`` export are made on (our code).

:mod:`insightface_recorder` and :mod:`cc11_recorder` run the references on them;
``tests/test_bin_export.py`` and ``tests/test_insightface_bin.py`` rebuild the very same
inputs and run facecast on them. Everything here is a function of the seeds below: same
numbers, same crops, same ``.bin`` bytes on every machine with the same libraries.

* :func:`write_run`: a faces shard whose ``crop_arcface`` holds 112 px PNG crops (six
  identities, each a smooth pattern seen with noise) and mined benchmarks'
  ``pairs.parquet`` (folds ``0``..``9`` + ``val``) - the layout the pipeline leaves.
* :data:`EXPORTS`: the ``.bin`` exports of them that the records read back.
* :func:`roc_cases`: embeddings hostile to a 10-fold accuracy (perfect separation,
  distances on every grid threshold, float32, tiny protocols, a fold without genuine
  pairs).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

IDS = [f"id{k}" for k in range(6)]
PER_ID = 4
#: seeds: crops, benchmark pairs, the export's seed
CROP_SEED, PAIR_SEED, EXPORT_SEED = 0, 1, 7
#: CAST's CC11 benchmark names, in cc11.py's block order (facecast.config.bin_sets)
CC11 = ["black", "caucasian", "east_asian", "latinx", "middle_eastern", "young", "female",
        "male", "glasses_facial_hair", "low_p2p", "random"]
#: export name -> (benchmarks, export.bins settings)
EXPORTS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "black_test": (["black"], {}),
    "cc3": (["black", "young", "random"], {"block_size": 40}),
    "jpg": (["black"], {"encoding": "jpg", "quality": 90}),
    "cc11": (CC11, {}),
}


def upsample_exact(small: np.ndarray, size: int = 112) -> np.ndarray:
    """``small`` (h x w x c uint8) bilinearly enlarged to ``size`` x ``size`` in integer
    arithmetic (weights over a common denominator, one floor division): the same pixels on
    every CPU. (OpenCV's ``resize`` picks SIMD kernels per CPU, and their roundings differ:
    crops made with it on another machine were not these crops.)"""
    h, w = small.shape[:2]

    def weights(n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        # output centre (2j + 1) / (2 size) in input pixels, minus 1/2, as num / den
        den = 2 * size
        num = (2 * np.arange(size) + 1) * n_in - size
        num = np.clip(num, 0, (n_in - 1) * den)
        lo = np.minimum(num // den, n_in - 2)
        frac = num - lo * den
        return lo, lo + 1, frac, den

    y0, y1, fy, dy = weights(h)
    x0, x1, fx, dx = weights(w)
    px = small.astype(np.int64)
    rows = px[y0] * (dy - fy)[:, None, None] + px[y1] * fy[:, None, None]
    both = rows[:, x0] * (dx - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]
    den = dy * dx
    return ((both + den // 2) // den).astype(np.uint8)


def crops() -> dict[str, np.ndarray]:
    """image_id -> 112x112x3 uint8 crop: per identity a smooth pattern, noisy per image."""
    rng = np.random.default_rng(CROP_SEED)
    out = {}
    for ident in IDS:
        base = upsample_exact(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).astype(np.float32)
        for k in range(PER_ID):
            noisy = base + rng.normal(0, 120, base.shape)
            out[f"{ident}/{k}.jpg"] = np.clip(noisy, 0, 255).astype(np.uint8)
    return out


def mining_pairs(rng: np.random.Generator, n_gen: list[int], n_imp: list[int]
                 ) -> pd.DataFrame:
    """Pairs in mining layout: fold f holds n_gen[f] genuine then n_imp[f] impostor pairs
    (folds 0..9 then val)."""
    rows = []
    for f, (g, i) in enumerate(zip(n_gen, n_imp, strict=True)):
        fold = str(f) if f < 10 else "val"
        for label, n in ((1, g), (0, i)):
            for _ in range(n):
                a_id = IDS[rng.integers(len(IDS))]
                b_id = a_id if label else IDS[(IDS.index(a_id) + 1 + rng.integers(5)) % 6]
                ka, kb = rng.choice(PER_ID, 2, replace=False)
                rows.append((f"{a_id}/{ka}.jpg", f"{b_id}/{kb}.jpg", a_id, b_id, label, fold,
                             0.0))
    return pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "fold", "ref_score"])


def benchmarks() -> dict[str, pd.DataFrame]:
    """black (band: 10 x (3 + 3)), young (band: 10 x (2 + 4)), random (unequal folds, as
    mode all) and the eleven CC11 names (band: 10 x (2 + 2) each; black and young keep
    theirs)."""
    rng = np.random.default_rng(PAIR_SEED)
    out = {"black": mining_pairs(rng, [3] * 11, [3] * 11),
           "young": mining_pairs(rng, [2] * 11, [4] * 11),
           "random": mining_pairs(rng, [5, 4, 4, 3, 4, 4, 3, 4, 4, 4, 2],
                                  [6, 7, 6, 6, 7, 6, 6, 7, 6, 6, 3])}
    for name in CC11:
        out[f"cc_{name}"] = mining_pairs(rng, [2] * 11, [2] * 11)
    return out


def sources(run: dict[str, Any], benches: list[str]) -> dict[str, Path]:
    """Benchmark -> pairs.parquet of an export (a CC11 name reads its ``cc_`` benchmark)."""
    return {b: run["paths"][f"cc_{b}" if list(benches) == CC11 else b] for b in benches}


def write_run(folder: Path) -> dict[str, Any]:
    """The faces shard (plus a row without a face) and every benchmark's pairs.parquet
    under ``folder``."""
    from facecast.faces.crops import encode_png
    from facecast.io.parquet_io import write_parquet

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    crop = crops()
    faces = pd.DataFrame({"image_id": list(crop), "status": "ok",
                          "crop_arcface": [encode_png(c) for c in crop.values()]})
    faces.loc[len(faces)] = ["lost/0.jpg", "no_face", None]
    write_parquet(faces, folder / "faces.parquet")
    benches = benchmarks()
    paths = {}
    for b, p in benches.items():
        paths[b] = folder / b / "pairs.parquet"
        paths[b].parent.mkdir(exist_ok=True)
        write_parquet(p, paths[b])
    return {"dir": folder, "crops": crop, "faces": [folder / "faces.parquet"],
            "pairs": benches, "paths": paths}


def export(run: dict[str, Any], name: str, benches: list[str] | None = None,
           **cfg: Any) -> tuple[Path, dict[str, Any]]:
    """Export ``name`` (from :data:`EXPORTS` when ``benches`` is None) with facecast."""
    from facecast.analysis.bins import export_bin

    if benches is None:
        benches, preset = EXPORTS[name]
        cfg = {**preset, **cfg}
    out = run["dir"] / "bins" / f"{name}.bin"
    meta = export_bin(sources(run, benches), run["faces"], out, name=name,
                      cfg={"benchmarks": list(benches), **cfg}, seed=EXPORT_SEED,
                      provenance={"config_hash": "abc123"})
    return out, meta


def lbp_embed(images: np.ndarray) -> np.ndarray:
    """A model that embeds from the aligned crop (facecast's LBP histograms, HxWx3 RGB
    uint8 in), L2-normalised."""
    import torch

    from facecast.embed.lbp import LBPEmbedder

    f = LBPEmbedder("lbp").embed(torch.from_numpy(np.ascontiguousarray(images)))
    return f / np.linalg.norm(f, axis=1, keepdims=True)


def image_digest(chw: np.ndarray) -> str:
    """A short digest of one decoded image as insightface's ``load_bin`` holds it
    (channels first, RGB, uint8 values)."""
    arr = np.ascontiguousarray(np.asarray(chw, np.uint8))
    return hashlib.sha256(arr.tobytes() + str(arr.shape).encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------- 10-fold accuracy inputs

def _signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Unit vectors of 16 entries +-1/4: dot products are multiples of 1/8 and squared
    distances multiples of 1/4, exact in floating point and on insightface's grid."""
    return rng.choice([-0.25, 0.25], (n, 16))


def _flipped(e: np.ndarray, flips: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = e.copy()
    for k, f in enumerate(flips):
        idx = rng.choice(16, int(f), replace=False)
        out[k, idx] = -out[k, idx]
    return out


def _layout(n_gen: int, n_imp: int) -> np.ndarray:
    """Labels of a block laid out as the export lays it out (facecast's bin_pair_order)."""
    from facecast.analysis.bins import bin_pair_order

    labels = np.r_[np.ones(n_gen, int), np.zeros(n_imp, int)]
    return labels[bin_pair_order(labels)]


def roc_case(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(embeddings1, embeddings2, issame) of one case of :data:`ROC_CASES`."""
    seed, kind = ROC_CASES[name]
    rng = np.random.default_rng(seed)
    if kind in ("perfect", "grid_ties", "one_class_fold"):
        y = {"perfect": _layout(50, 50), "grid_ties": _layout(90, 110),
             "one_class_fold": _layout(5, 95)}[kind]
        e1 = _signs(rng, len(y))
        if kind == "perfect":
            flips = np.where(y == 1, rng.integers(0, 3, len(y)), rng.integers(10, 17, len(y)))
        else:
            flips = np.where(y == 1, rng.integers(0, 9, len(y)), rng.integers(3, 17, len(y)))
        return e1, _flipped(e1, flips, rng), y.astype(bool)
    n = {"float32": 300, "tiny_11": 11, "tiny_23": 23}[kind]
    y = rng.random(n) < 0.5
    dim = 128 if kind == "float32" else 8
    e1 = rng.standard_normal((n, dim))
    e2 = np.where(y[:, None], e1 + rng.standard_normal((n, dim)) * 0.9,
                  rng.standard_normal((n, dim)))
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 /= np.linalg.norm(e2, axis=1, keepdims=True)
    if kind == "float32":  # normalised in float32, as a float32 model output
        e1, e2 = (x.astype(np.float32) for x in (e1, e2))
        e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
        e2 /= np.linalg.norm(e2, axis=1, keepdims=True)
    return e1, e2, y


#: case -> (seed, kind)
ROC_CASES: dict[str, tuple[int, str]] = {
    "perfect": (11, "perfect"),
    "grid_ties": (12, "grid_ties"),
    "float32": (13, "float32"),
    "tiny_11": (14, "tiny_11"),
    "tiny_23": (15, "tiny_23"),
    "one_class_fold": (16, "one_class_fold"),
}


def lfw_like(n_pairs: int = 205) -> tuple[np.ndarray, np.ndarray]:
    """(issame, unit float32 embeddings of 2 x n_pairs images) of an LFW-like .bin: 205
    pairs (not a multiple of 10), genuine pairs closer on average with overlap."""
    issame = np.random.default_rng(7).random(n_pairs) < 0.5
    rng = np.random.default_rng(1)
    emb = rng.standard_normal((2 * n_pairs, 16))
    for k in np.flatnonzero(issame):
        emb[2 * k + 1] = emb[2 * k] + rng.standard_normal(16) * 1.1
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return issame, emb.astype(np.float32)
