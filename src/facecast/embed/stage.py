"""Stage ``embed``: one faces shard in, one embedding Parquet per model out.

Every faces row reaches the output. Rows whose faces status is ``ok``, ``fallback`` or
``aligned_input`` (pre-aligned input, ``faces.detector: none``) or ``landmarks_given`` (IJB) and that carry a crop are embedded and get status ``ok`` (a fallback crop keeps a note in
``message``); the others keep their faces status and message, with a null embedding.
A crop that does not decode gets ``decode_error``. A feature vector with NaN or inf, all
zeros, or a norm beyond float32 gets ``embed_error`` with the reason in ``message`` (never
``ok`` with an infinite norm); when every row that reached the model fails so, the job
stops with :class:`UnusableFeaturesError` (see :func:`feature_problems`). ``norm`` is the
raw feature norm (a MagFace-style quality signal) and ``embedding`` the L2-normalised
feature, both null unless ``ok``.

On CPU a batch of a thread-safe backend (``Embedder.thread_safe``: arcface_torch) is cut
into micro-batches of ``embed.cpu_micro_batch`` crops (8 by default; 0 = the whole batch
in one forward pass, with torch's intra-op threads): small batches keep activations in
cache, and the job's threads each run whole micro-batches with single-threaded torch, so no
core waits at OpenMP barriers (which costs most on a shared, loaded machine). The features
do not depend on the threads; they equal whole-batch features to float rounding. CPU jobs
also raise glibc's malloc thresholds (``embed.tune_malloc``, :mod:`facecast.embed.malloc`).

Batch invariance (insightface issue #1351: IJB-C TAR@1e-5 moved with the batch size). oneDNN
and MKL pick convolution and matrix kernels by the input's shape, so the same crop in a
forward of 1, 7 or 64 crops got features differing by up to ~5e-6 (iResNet-18, ViT-T:
raw; ~6e-7 normalised). On CPU every forward of a backend that computes batches therefore
gets exactly ``embed.cpu_micro_batch`` crops (8; the last micro-batch of a batch padded with
blank crops whose features are dropped), whatever ``embed.batch_size`` and wherever the
crop sits, and a crop's features are the same bits in every case
(``tests/test_embed_batch_invariance.py``: every backend at batch sizes 1, 7 and 64, the
crop at different positions). Backends that compute crop by crop (``Embedder.per_crop``:
sface, lbp) are not padded. The provenance of every embedding file says
``batch_invariant`` (true/false), ``forward_batch`` and why (``batch_invariance``):
false with ``embed.cpu_micro_batch: 0``.

On CUDA the batch is one forward and cuDNN picks kernels by its shape; what decides is the
precision (:mod:`facecast.embed.cuda_numerics`, measured on an H200, issue 40). fp32
(``embed.amp: none``) with TF32 off (``embed.tf32: false``, the default: both switches are
turned off for the job and restored after, and cuDNN's autotuner off): a crop's normalised
embedding equals its batch-1 value to <= 1e-6 (4.5e-7 measured at batch 1/7 vs 96, 0 in reversed order) -
``batch_invariant`` true with that tolerance: close, not bit-equal. ``embed.tf32: true``
(faster fp32 convolutions) moves it by up to 1.3e-4 (batch 1 vs 96): false. fp16 moves it
by 4.7e-4 / 3.5e-4 (batch 7 / 1), bf16 by an unmeasured amount: false. A
``torch.compile``'d model is not covered by the fp32 measurement: false.
``benchmarks/batch_invariance.py`` measures the rule on the machine at hand (batch sizes
1/7/64/256, two orders). The provenance of a CUDA job also says ``tf32``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm import tqdm

from facecast.embed.base import CROP_SIZES, Embedder, active_amp
from facecast.embed.cuda_numerics import (
    DEFAULT_COMPILE_CACHE,
    compile_cache,
    compile_cache_dir,
    cuda_batch_invariance,
    cudnn_benchmark,
)
from facecast.embed.data import crop_loader, decoder_names, resolve_workers
from facecast.embed.lbp import (
    CovarianceAccumulator,
    LBPEmbedder,
    fit_whitening,
    save_fit,
    unwhitened_fit,
)
from facecast.embed.malloc import tune_malloc
from facecast.embed.registry import build_embedder
from facecast.faces.cuda_fp32 import cuda_fp32
from facecast.io.parquet_io import write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger("facecast.embed")

EMBEDDABLE = ("ok", "fallback", "aligned_input", "landmarks_given")
EMBED_DEFAULTS: dict[str, Any] = {"device": "auto", "batch_size": 64, "amp": "none",
                                  "num_workers": -1, "cpu_micro_batch": 8, "tune_malloc": True,
                                  "gpu_jpeg": False, "tf32": False,
                                  "compile_cache": DEFAULT_COMPILE_CACHE}


def embed_schema(dim: int) -> pa.Schema:
    """Arrow schema of an embedding shard with ``dim``-D embeddings."""
    return pa.schema([
        ("image_id", pa.string()),
        ("status", pa.string()),
        ("message", pa.string()),
        ("embedding", pa.list_(pa.float32(), dim)),
        ("norm", pa.float32()),
    ])


def load_embedder(model_name: str, model_cfg: dict[str, Any], embed_cfg: dict[str, Any],
                  fit_path: str | None = None, threads: int = 1) -> Embedder:
    """Build the embedder of ``model_name`` with the stage settings (device, amp)."""
    cfg = {**EMBED_DEFAULTS, **(embed_cfg or {})}
    return build_embedder(model_name, model_cfg, device=cfg["device"], amp=cfg["amp"],
                          fit_path=fit_path, threads=threads)


def batch_invariance(embedder: Embedder, micro_batch: int, tf32: bool = False
                     ) -> dict[str, Any]:
    """Whether a crop's features cannot depend on its batch (size, position, neighbours),
    and why: the provenance keys ``batch_invariant`` and ``forward_batch`` (module
    docstring, "Batch invariance"); on CUDA the rule of
    :func:`facecast.embed.cuda_numerics.cuda_batch_invariance` (``tf32``: ``embed.tf32``)."""
    if embedder.per_crop:
        return {"batch_invariant": True, "forward_batch": 1,
                "batch_invariance": "features computed crop by crop"}
    if embedder.device.type != "cpu":
        return {**cuda_batch_invariance(active_amp(embedder.device, embedder.amp), bool(tf32),
                                        bool(getattr(embedder, "compiled", False))),
                "tf32": bool(tf32)}
    if micro_batch <= 0:
        return {"batch_invariant": False, "forward_batch": None,
                "batch_invariance": "embed.cpu_micro_batch 0: one forward per batch, whose "
                                    "shape follows batch_size (oneDNN picks kernels by shape)"}
    return {"batch_invariant": True, "forward_batch": int(micro_batch),
            "batch_invariance": f"every CPU forward has exactly {int(micro_batch)} crops "
                                "(the last micro-batch padded with blank crops)"}


def _padded(batch: torch.Tensor, size: int) -> torch.Tensor:
    """``batch`` with blank (zero) crops appended up to ``size`` rows."""
    if len(batch) == size:
        return batch
    pad = torch.zeros((size - len(batch), *batch.shape[1:]), dtype=batch.dtype)
    return torch.cat([batch, pad])


@contextlib.contextmanager
def micro_batch_runner(embedder: Embedder, micro_batch: int, threads: int
                       ) -> Iterator[Callable[[torch.Tensor], np.ndarray]]:
    """A function ``batch -> features`` for :func:`embed_crops` (module docstring).

    On CPU with ``micro_batch > 0`` the batch is cut into micro-batches of exactly
    ``micro_batch`` crops, the last padded with blank crops whose features are dropped, so
    every forward has the same shape and a crop's features do not depend on the batch
    size or its position (:func:`batch_invariance`). A thread-safe embedder's
    micro-batches run in ``threads`` threads with torch's intra-op threads set to 1 for
    the block (restored after); others run one after another. Otherwise (GPU,
    ``micro_batch`` 0, or an embedder that computes crop by crop) ``embedder.embed`` as
    it is.
    """
    if embedder.device.type != "cpu" or micro_batch <= 0 or embedder.per_crop:
        yield embedder.embed
        return
    pooled = embedder.thread_safe
    threads = max(1, int(threads)) if pooled else 1
    old = torch.get_num_threads()
    if pooled:
        torch.set_num_threads(1)
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None

    def one(part: torch.Tensor) -> np.ndarray:
        return embedder.embed(_padded(part, micro_batch))[:len(part)]

    def run(batch: torch.Tensor) -> np.ndarray:
        parts = [batch[i:i + micro_batch] for i in range(0, len(batch), micro_batch)]
        outs = pool.map(one, parts) if pool and len(parts) > 1 else map(one, parts)
        return np.concatenate(list(outs))

    try:
        yield run
    finally:
        if pool:
            pool.shutdown()
        torch.set_num_threads(old)


def embed_crops(embedder: Embedder, crops: Sequence[bytes | None], rows: np.ndarray, *,
                batch_size: int, num_workers: int = 0, threads: int = 1,
                desc: str = "embed", micro_batch: int = 0, gpu_jpeg: bool = False
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Raw features of the PNG (or JPEG) crops ``crops[rows]``; ``gpu_jpeg``: JPEG crops
    decoded by nvJPEG when the embedder is on CUDA (:mod:`facecast.embed.data`).

    Returns ``(features (len(rows), D) float32, ok mask, error messages)``, aligned with
    ``rows``; a crop that does not decode has ok False and a message, features NaN.
    ``micro_batch`` > 0 cuts CPU batches of thread-safe embedders into micro-batches run
    by ``threads`` threads (:func:`micro_batch_runner`).
    """
    rows = np.asarray(rows, np.int64)
    feats = np.full((len(rows), embedder.dim), np.nan, np.float32)
    ok = np.zeros(len(rows), bool)
    errors = [""] * len(rows)
    if len(rows) == 0:
        return feats, ok, errors
    pos = {int(r): i for i, r in enumerate(rows)}
    workers = resolve_workers(num_workers, embedder.device, threads)
    loader = crop_loader(crops, rows, batch_size=batch_size,
                         size=CROP_SIZES[embedder.crop_column], device=embedder.device,
                         num_workers=workers, gpu_jpeg=gpu_jpeg)
    with micro_batch_runner(embedder, int(micro_batch), threads) as forward:
        n_batches = -(-len(rows) // max(1, int(batch_size)))
        for batch, idx, good, errs in tqdm(loader, total=n_batches, desc=desc, unit="batch",
                                           mininterval=5.0):
            where = np.array([pos[int(r)] for r in idx.numpy()])
            good_np = good.numpy()
            for j in np.flatnonzero(~good_np):
                errors[where[j]] = errs[j]
            if good_np.any():
                sel = batch if good_np.all() else batch[torch.from_numpy(good_np)]
                feats[where[good_np]] = forward(sel)
                ok[where[good_np]] = True
    return feats, ok, errors


#: largest float32: a norm beyond it cannot be stored in the ``norm`` column
F32_MAX = float(np.finfo(np.float32).max)


class UnusableFeaturesError(RuntimeError):
    """Every face that reached a model gave unusable (non-finite or zero) features."""


def feature_problems(feats: np.ndarray, model: str, amp: str = "none"
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Norms (float64, so finite features never overflow) and per-row reasons of raw features.

    A row's reason is ``""`` when it is usable, else says why not: NaN/inf features, an
    all-zero vector, or a norm beyond float32 (the ``norm`` column); under mixed precision
    it suggests ``embed.amp: none``.
    """
    f64 = np.asarray(feats, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(f64, axis=1)
    nan, inf = np.isnan(f64).any(axis=1), np.isinf(f64).any(axis=1)
    reasons = np.full(len(f64), "", dtype=object)
    hint = f"; embed.amp is {amp}: try embed.amp: none" if amp != "none" else ""
    for i in np.flatnonzero(nan | inf | ~(norms > 0) | ~(norms <= F32_MAX)):
        if nan[i] or inf[i]:
            kinds = " and ".join(k for k, hit in (("nan", nan[i]), ("inf", inf[i])) if hit)
            why = f"non-finite features ({kinds}) from model {model}"
        elif norms[i] == 0:
            why = f"all-zero feature vector from model {model}"
        else:
            why = f"feature norm beyond float32 from model {model} (norm {norms[i]:.3g})"
        reasons[i] = why + hint
    return norms, reasons


def unusable_error(embedder: Embedder, reasons: np.ndarray) -> UnusableFeaturesError:
    """The one error of a job whose every embedded face failed: the model and likely cause."""
    kinds = pd.Series([r.split(" from model")[0] for r in reasons]).value_counts()
    summary = "; ".join(f"{k}: {v}" for k, v in kinds.items())
    amp = active_amp(embedder.device, embedder.amp)
    if amp != "none":
        cause = (f"activations overflowing under {amp} mixed precision; set embed.amp: none"
                 + (" (or bf16, which has float32's range)" if amp == "fp16" else ""))
    else:
        where = f" ({embedder.weights_path})" if embedder.weights_path else ""
        cause = (f"a broken model or weight file{where}, or input scaling it was not "
                 "trained with (its mean/std/channel_order/crop options)")
    return UnusableFeaturesError(
        f"embedding model '{embedder.name}' (backend {embedder.backend}, device "
        f"{embedder.device}, amp {embedder.amp}): all {len(reasons)} faces that reached the "
        f"model gave unusable features ({summary}). Likely cause: {cause}.")


def embed_shard(faces_path: str | os.PathLike, out_path: str | os.PathLike, model_name: str,
                model_cfg: dict[str, Any], embed_cfg: dict[str, Any] | None = None, *,
                fit_path: str | None = None, provenance: dict[str, Any] | None = None,
                threads: int = 1) -> pd.DataFrame:
    """Embed every face of one faces shard with one model; write ``out_path``.

    The model (and its weights) is loaded before the shard is read, so a missing weight
    file fails at once with a message naming the file. Returns the written table. On CUDA
    both TF32 switches are ``embed.tf32`` (off by default) for the job and restored after,
    and cuDNN's autotuner runs only where no batch invariance is claimed
    (:func:`facecast.faces.cuda_fp32.cuda_fp32`, ``cudnn_benchmark`` in the provenance);
    a model with ``compile: true`` compiles with TorchInductor's cache in
    ``embed.compile_cache`` (:mod:`facecast.embed.cuda_numerics`; the folder is in the
    provenance, ``compile_cache``).
    """
    cfg = {**EMBED_DEFAULTS, **(embed_cfg or {})}
    cache = compile_cache_dir(cfg["compile_cache"]) if (model_cfg or {}).get("compile") else None
    cuda = cfg["device"] != "cpu" and torch.cuda.is_available()
    prov = {**(provenance or {}), **({"compile_cache": portable_path(cache)} if cache else {})}
    with compile_cache(cache), cuda_fp32("cuda" if cuda else "cpu", tf32=bool(cfg["tf32"])):
        return _embed_shard(faces_path, out_path, model_name, model_cfg, cfg,
                            fit_path=fit_path, provenance=prov, threads=threads)


def _embed_shard(faces_path: str | os.PathLike, out_path: str | os.PathLike, model_name: str,
                 model_cfg: dict[str, Any], embed_cfg: dict[str, Any] | None = None, *,
                 fit_path: str | None = None, provenance: dict[str, Any] | None = None,
                 threads: int = 1) -> pd.DataFrame:
    """:func:`embed_shard` inside its CUDA settings."""
    cfg = {**EMBED_DEFAULTS, **(embed_cfg or {})}
    embedder = load_embedder(model_name, model_cfg, cfg, fit_path=fit_path, threads=threads)
    if embedder.device.type == "cuda":  # the autotuner only where no invariance is claimed
        torch.backends.cudnn.benchmark = cudnn_benchmark(  # restored by cuda_fp32
            active_amp(embedder.device, embedder.amp), bool(cfg["tf32"]),
            bool(getattr(embedder, "compiled", False)))
    malloc_tuned = bool(cfg["tune_malloc"]) and embedder.device.type == "cpu" and tune_malloc()
    log.info("model %s: backend %s, %d-D, device %s, amp %s, weights %s", model_name,
             embedder.backend, embedder.dim, embedder.device, embedder.amp,
             embedder.weights_path)
    table = pq.read_table(faces_path, columns=["image_id", "status", "message",
                                               embedder.crop_column])
    n = table.num_rows
    image_id = table.column("image_id").to_pylist()
    status = np.array(table.column("status").to_pylist(), dtype=object)
    message = np.array([m or "" for m in table.column("message").to_pylist()], dtype=object)
    crops = table.column(embedder.crop_column).to_pylist()
    has_crop = np.array([c is not None for c in crops], bool)
    embeddable = np.isin(status, EMBEDDABLE)
    missing = embeddable & ~has_crop
    status[missing] = "no_crop"
    message[missing] = f"faces status ok but {embedder.crop_column} is empty"
    fallback = embeddable & has_crop & (status == "fallback")
    message[fallback] = ["fallback crop: " + m if m else "fallback crop" for m in message[fallback]]
    rows = np.flatnonzero(embeddable & has_crop)

    feats, ok, errors = embed_crops(embedder, crops, rows, batch_size=int(cfg["batch_size"]),
                                    num_workers=int(cfg["num_workers"]), threads=threads,
                                    desc=f"embed {model_name}",
                                    micro_batch=int(cfg["cpu_micro_batch"]),
                                    gpu_jpeg=bool(cfg["gpu_jpeg"]))
    emb = np.zeros((n, embedder.dim), np.float32)
    norm = np.full(n, np.nan, np.float32)
    good = np.zeros(n, bool)
    for i, r in enumerate(rows):
        if not ok[i]:
            status[r], message[r] = "decode_error", errors[i]
    norms, reasons = feature_problems(feats, model_name, active_amp(embedder.device, embedder.amp))
    finite = ok & (reasons == "")
    bad = ok & ~finite
    if bad.any() and not finite.any():
        raise unusable_error(embedder, reasons[bad])
    status[rows[bad]] = "embed_error"
    message[rows[bad]] = reasons[bad]
    if bad.any():
        log.warning("model %s: %d of %d embedded faces gave unusable features (status "
                    "embed_error), e.g. %s", model_name, int(bad.sum()), int(ok.sum()),
                    reasons[bad][0])
    ok_rows = rows[finite]
    emb[ok_rows] = (feats[finite] / norms[finite, None]).astype(np.float32)
    norm[ok_rows] = norms[finite]
    good[ok_rows] = True
    status[ok_rows] = "ok"

    mask = pa.array(~good)
    emb_arr = pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), embedder.dim,
                                                mask=mask)
    out = pa.table({
        "image_id": pa.array(image_id, pa.string()),
        "status": pa.array(status.tolist(), pa.string()),
        "message": pa.array(message.tolist(), pa.string()),
        "embedding": emb_arr,
        "norm": pa.array(norm, pa.float32(), mask=~good),
    }, schema=embed_schema(embedder.dim))
    prov = {**(provenance or {}), "stage": "embed", **embedder.provenance(),
            "n_unusable_features": int(bad.sum()),
            "decoder": decoder_names(crops, rows, gpu_jpeg=bool(cfg["gpu_jpeg"]),
                                     device=embedder.device)}
    if embedder.device.type == "cpu" and not embedder.per_crop:
        prov["cpu_micro_batch"] = int(cfg["cpu_micro_batch"])
    prov.update(batch_invariance(embedder, int(cfg["cpu_micro_batch"]), bool(cfg["tf32"])))
    if embedder.device.type == "cuda":
        prov["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    if embedder.device.type == "cpu":
        prov["malloc_tuned"] = malloc_tuned
    write_parquet(out, out_path, provenance=prov)
    counts = pd.Series(status).value_counts().to_dict()
    log.info("wrote %s: %d rows, statuses %s", out_path, n, counts)
    return out.to_pandas()


def fit_model(manifest_path: str | os.PathLike, faces_paths: Sequence[str | os.PathLike],
              out_path: str | os.PathLike, model_name: str, model_cfg: dict[str, Any],
              embed_cfg: dict[str, Any] | None = None, *, threads: int = 1) -> Path:
    """Fit the per-dataset transform of a fitted backend (today: ``lbp``)."""
    if model_cfg.get("backend") == "lbp":
        return fit_lbp(manifest_path, faces_paths, out_path, model_name, model_cfg, embed_cfg,
                       threads=threads)
    raise ValueError(f"model {model_name!r} (backend {model_cfg.get('backend')}) needs no fit")


def fit_lbp(manifest_path: str | os.PathLike, faces_paths: Sequence[str | os.PathLike],
            out_path: str | os.PathLike, model_name: str, model_cfg: dict[str, Any],
            embed_cfg: dict[str, Any] | None = None, *, threads: int = 1) -> Path:
    """Fit the LBP PCA whitening on the ``fit_split`` rows (default ``train``) of a dataset.

    Streams over the faces shards (only embeddable rows of the split). A whitening needs
    more training faces than ``pca_dim`` and must not be fitted on images that are
    evaluated: with no row in the split, with split rows that are not marked ``exclude`` from
    benchmarks, or with ``n_train <= pca_dim`` the fit is refused. ``on_small_fit`` says
    what then happens: ``unwhitened`` (default) writes a fit file with ``whitening = none``
    and the reason (the embedder then returns raw Hellinger LBP features; the reason is in
    the log and in every embedding file's provenance), ``error`` stops the job.
    """
    cfg = {**EMBED_DEFAULTS, **(embed_cfg or {})}
    split = str(model_cfg.get("fit_split", "train"))
    pca_dim = int(model_cfg.get("pca_dim", 128))
    policy = str(model_cfg.get("on_small_fit", "unwhitened"))
    embedder = LBPEmbedder(model_name, weights=None, radii=model_cfg.get("radii", (1, 2)),
                           grid=int(model_cfg.get("grid", 7)))
    cols = ["image_id", "split"] + (["exclude"] if "exclude" in
                                    pq.read_schema(manifest_path).names else [])
    manifest = pq.read_table(manifest_path, columns=cols).to_pandas()
    in_split = manifest["split"].astype(str) == split
    train_ids = set(manifest.loc[in_split, "image_id"].astype(str))
    reason = ""
    if not train_ids:
        reason = f"no manifest row has split == {split!r}"
    elif "exclude" in manifest:
        evaluated = int((in_split & ~manifest["exclude"].fillna(False).astype(bool)).sum())
        if evaluated:
            reason = (f"{evaluated} of the {len(train_ids)} {split!r} images are not excluded "
                      "from benchmarks, so the whitening would be fitted on evaluated images")
    acc = CovarianceAccumulator(embedder.dim)
    if not reason:
        for path in faces_paths:
            t = pq.read_table(path, columns=["image_id", "status", "crop_arcface"])
            ids = np.array(t.column("image_id").to_pylist(), dtype=object)
            st = np.array(t.column("status").to_pylist(), dtype=object)
            crops = t.column("crop_arcface").to_pylist()
            sel = np.isin(st, EMBEDDABLE) & np.array([c is not None for c in crops], bool)
            sel &= np.array([i in train_ids for i in ids], bool)
            feats, ok, _ = embed_crops(embedder, crops, np.flatnonzero(sel),
                                       batch_size=max(int(cfg["batch_size"]), 256),
                                       threads=threads, desc=f"fit {model_name} {Path(path).stem}")
            acc.update(feats[ok])
        if acc.n <= pca_dim:
            reason = (f"only {acc.n} embeddable {split!r} faces for pca_dim {pca_dim} "
                      "(a whitening needs more training faces than dimensions)")
    if reason:
        key = f"embed.models.{model_name}"
        advice = (f"mark a training split that is excluded from benchmarks and larger than "
                  f"{key}.pca_dim (manifest columns split/exclude, {key}.fit_split), or lower "
                  f"{key}.pca_dim")
        if policy == "error":
            raise ValueError(f"LBP whitening of {model_name!r} refused: {reason}. To fix: "
                             f"{advice}; or set {key}.on_small_fit: unwhitened.")
        log.warning("LBP whitening of %r refused: %s. Using UNWHITENED Hellinger LBP features "
                    "(stated in every embedding file's provenance). To fix: %s.",
                    model_name, reason, advice)
        fit = unwhitened_fit(embedder.dim, acc.n, reason)
        fit["fit_split"] = np.array(split)
        return save_fit(out_path, fit, embedder.radii, embedder.grid)
    fit = fit_whitening(acc, pca_dim=pca_dim, eps=float(model_cfg.get("whiten_eps", 1e-3)))
    fit["fit_split"] = np.array(split)
    log.info("LBP whitening: %d faces (%s split), %d -> %d dims", acc.n, split,
             embedder.dim, fit["projection"].shape[1])
    return save_fit(out_path, fit, embedder.radii, embedder.grid)
