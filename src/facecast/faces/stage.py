"""Stage ``faces``: one manifest shard in, one faces Parquet out (see docs/CONTRACTS.md).

Every manifest row yields exactly one output row. Rows the manifest already flagged keep
their status and message; the others are decoded (:mod:`facecast.faces.decode`), run
through the detector in batches (MTCNN, :mod:`facecast.faces.detect`, or YuNet,
:mod:`facecast.faces.yunet`), and the chosen face is
aligned (:mod:`facecast.faces.align`) and stored as lossless PNG bytes.

Statuses written here: ``ok`` (face found and aligned), ``no_face``, ``fallback``
(no face; centre crop of a pre-aligned image, when ``faces.fallback: center_crop``),
``decode_error``, ``missing``/``unreadable`` (file vanished or unreadable since the
manifest was built), ``outside_root``, ``detect_error``/``align_error`` (the detector or
the warp failed on this image; the message says why); with ``faces.detector: none``
(pre-aligned input, :mod:`facecast.faces.aligned`) ``aligned_input`` instead of ``ok``,
and no detector is loaded. Datasets that give five landmarks per image (IJB, RFW's
``_lmk.txt``; manifest columns ``given_landmarks``/``given_score``) are aligned with them:
``landmarks_given`` (:mod:`facecast.faces.given`). A row without usable given points is
detected like any other image (statuses above) when ``faces.detector`` names a detector;
with ``faces.detector: none`` it gets ``no_landmarks``. Column ``landmark_source`` says per
row which path ran: ``given``, the detector's name (``mtcnn``, ``yunet``), ``template``
(pre-aligned input) or null (no alignment was tried). The detector is loaded only when some
row of the shard needs it (:func:`plan_rows`): a shard whose rows all have given points
imports no torch.

Images come from files under the dataset root, or, for container datasets (RecordIO,
insightface ``.bin``), from locators ``<file>#<index>`` read by random access
(:mod:`facecast.datasets.sources`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from facecast.datasets.manifest import GIVEN_COLUMNS, read_shard
from facecast.datasets.sources import fetch_bytes, resolve_containers, split_locator
from facecast.faces.align import center_square_box, crop_box_resized, face_crops
from facecast.faces.aligned import aligned_row
from facecast.faces.config import FacesConfig
from facecast.faces.crops import encode_png
from facecast.faces.cuda_fp32 import cuda_fp32
from facecast.faces.decode import DecodedImage, read_image
from facecast.faces.detect import Detections, FaceDetector, select_face
from facecast.faces.given import (
    GIVEN_SOURCE,
    GIVEN_STATUS,
    NO_LANDMARKS,
    given_points,
    given_row,
)
from facecast.faces.yunet import YuNetDetector
from facecast.io.parquet_io import ParquetStreamWriter, read_provenance
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

FACES_SCHEMA = pa.schema([
    ("image_id", pa.string()),
    ("status", pa.string()),
    ("message", pa.string()),
    ("image_width", pa.int32()),
    ("image_height", pa.int32()),
    ("n_faces", pa.int32()),
    ("face_box_areas", pa.list_(pa.float32())),
    ("det_score", pa.float32()),
    ("bbox", pa.list_(pa.float32())),
    ("landmarks", pa.list_(pa.float32())),
    ("landmark_source", pa.string()),
    ("crop_arcface", pa.binary()),
    ("crop_facenet", pa.binary()),
])
ARCFACE_SIZE = 112
FACENET_SIZE = 160
ROWS_PER_GROUP = 256
#: ``landmark_source`` of pre-aligned input (``faces.detector: none``): the template's points
TEMPLATE_SOURCE = "template"


@dataclass
class _Job:
    image_id: str
    status: str
    message: str
    path: Path | None = None
    decoded: DecodedImage | None = None
    locator: str | None = None
    has_given: bool = False  # the manifest has given landmarks (for this row or others)
    landmarks: np.ndarray | None = None  # this row's usable given points (given_points)
    score: Any = None

    @property
    def given(self) -> bool:
        """The dataset gives usable landmarks for this row."""
        return self.landmarks is not None

    def route(self, detect: bool) -> str:
        """:func:`landmark_path` of this job (``detect``: a detector is loaded)."""
        return landmark_path(self.status == "ok", self.has_given, self.given, detect)


def landmark_path(ok: bool, has_given: bool, usable: bool, detect: bool) -> str:
    """The one rule for which path a row takes (the keys of :func:`plan_rows`): ``kept``
    (status not ``ok``), ``given`` (``usable`` given points), ``detect`` (a detector runs),
    else ``no_landmarks`` where the dataset gives points for other rows (``has_given``)
    or ``aligned`` (pre-aligned input)."""
    if not ok:
        return "kept"
    if usable:
        return "given"
    if detect:
        return "detect"
    return "no_landmarks" if has_given else "aligned"


def resolve_inside(root: Path, rel: str) -> Path | None:
    """``root / rel`` if it (and its real target) stays inside ``root``, else None."""
    root_real = os.path.realpath(root)
    full = Path(root) / rel
    real = os.path.realpath(full)
    if os.path.commonpath([root_real, real]) != root_real:
        return None
    return full


def _empty_row(image_id: str, status: str, message: str,
               dec: DecodedImage | None = None) -> dict[str, Any]:
    return {"image_id": image_id, "status": status, "message": message,
            "image_width": (dec.width or None) if dec else None,
            "image_height": (dec.height or None) if dec else None,
            "n_faces": None, "face_box_areas": None, "det_score": None, "bbox": None,
            "landmarks": None, "landmark_source": None,
            "crop_arcface": None, "crop_facenet": None}


def _to_full(points: np.ndarray, dec: DecodedImage) -> np.ndarray:
    """Array pixels -> full-resolution pixels (index convention), flattened float32."""
    pts = np.asarray(points, np.float64).reshape(-1, 2)
    scale = np.array([dec.scale_x, dec.scale_y])
    return ((pts + 0.5) / scale - 0.5).astype(np.float32).reshape(-1)


def box_areas(boxes: np.ndarray, dec: DecodedImage) -> list[float]:
    """Areas (full-resolution pixels, float32, largest first) of every detected box: what
    OFIQ's SingleFacePresent needs (the two largest), whichever face ``faces.select`` keeps."""
    full = _to_full(np.asarray(boxes).reshape(-1, 4), dec).astype(np.float64).reshape(-1, 4)
    areas = (full[:, 2] - full[:, 0]) * (full[:, 3] - full[:, 1])
    return np.sort(areas.astype(np.float32))[::-1].tolist()


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def face_row(job: _Job, det: Detections, cfg: FacesConfig) -> dict[str, Any]:
    """Output row for a decoded image and its detections (chosen face aligned and encoded)."""
    dec = job.decoded
    assert dec is not None and dec.array is not None
    image = dec.array
    row = _empty_row(job.image_id, "ok", dec.message, dec)
    if det.error:
        row.update(status="detect_error", message=_join(det.error, dec.message))
        return row
    n = len(det)
    row["n_faces"] = n
    row["face_box_areas"] = box_areas(det.boxes, dec)
    h, w = image.shape[:2]
    idx = select_face(det, cfg.select, w, h)
    level = cfg.png_compress_level
    if idx is None:
        if cfg.fallback != "center_crop":
            why = (f"yunet score_threshold={cfg.yunet.score_threshold}" if cfg.detector == "yunet"
                   else f"min_face_size={cfg.min_face_size}, thresholds={list(cfg.thresholds)}")
            row.update(status="no_face", message=_join(f"no face found ({why})", dec.message))
            return row
        box = center_square_box(w, h, cfg.center_crop_fraction)
        row.update(status="fallback", message=_join(
            "no face found; centre crop used (faces.fallback=center_crop, fraction "
            f"{cfg.center_crop_fraction})", dec.message), bbox=_to_full(box, dec).tolist())
        if "arcface" in cfg.crops:
            row["crop_arcface"] = encode_png(crop_box_resized(image, box, ARCFACE_SIZE), level)
        if "facenet" in cfg.crops:
            row["crop_facenet"] = encode_png(crop_box_resized(image, box, FACENET_SIZE), level)
        return row
    box, lms = det.boxes[idx], det.landmarks[idx]
    row.update(det_score=float(det.scores[idx]), bbox=_to_full(box, dec).tolist(),
               landmarks=_to_full(lms, dec).tolist())
    if n > 1:
        row["message"] = _join(f"{n} faces; kept the {cfg.select} one", dec.message)
    try:
        row.update(face_crops(image, lms, box, cfg.crops, cfg.facenet_margin,
                              lambda a: encode_png(a, level)))
    except ValueError as exc:
        row.update(status="align_error", message=_join(f"alignment failed: {exc}", dec.message),
                   crop_arcface=None, crop_facenet=None)
    return row


def _decode_jobs(jobs: list[_Job], cfg: FacesConfig,
                 containers: Mapping[str, Any] | None = None) -> list[_Job]:
    # pre-aligned input is small and used whole: no reduced JPEG decoding
    min_side = 0 if cfg.detector == "none" else cfg.decode_max_side
    for job in jobs:
        job_side = 0 if job.given else min_side
        if job.status == "ok" and job.locator is not None:
            data, status, message = fetch_bytes(job.locator, containers or {})
            if data is None:
                job.status, job.message = status, message
                continue
            job.decoded = read_image(data, cfg.max_pixels, min_side=job_side)
        elif job.status == "ok" and job.path is not None:
            job.decoded = read_image(job.path, cfg.max_pixels, min_side=job_side)
        else:
            continue
        if job.decoded.status != "ok":
            job.status, job.message = job.decoded.status, job.decoded.message
    return jobs


def _job_row(j: _Job, det: Detections | None, detector: FaceDetector | None,
             cfg: FacesConfig, warned: dict[str, bool]) -> dict[str, Any]:
    """The output row of one decoded job, by its path: the dataset's points, the detector's
    ``det``, or (no detector) the pre-aligned template; ``landmark_source`` says which."""
    path = j.route(detector is not None)
    if path == "kept":
        return _empty_row(j.image_id, j.status, j.message, j.decoded)
    if path in ("given", "no_landmarks"):
        row = given_row(j.image_id, j.decoded, j.landmarks, j.score, cfg, j.message)
        row["landmark_source"] = GIVEN_SOURCE if path == "given" else None
        return row
    if path == "aligned":
        try:
            row = aligned_row(j.image_id, j.decoded, cfg, warned)
        except ValueError as exc:
            row = _empty_row(j.image_id, "align_error", _join(
                f"crop of the pre-aligned image failed: {exc}", j.message), j.decoded)
        row["landmark_source"] = TEMPLATE_SOURCE
        return row
    assert det is not None and detector is not None
    row = face_row(j, det, cfg)
    row["landmark_source"] = detector.name
    return row


def _process_chunk(jobs: list[_Job], detector: FaceDetector | None, cfg: FacesConfig,
                   warned: dict[str, bool] | None = None) -> list[dict[str, Any]]:
    warned = warned if warned is not None else {}
    todo = [j for j in jobs if j.route(detector is not None) == "detect"]
    dets = detector.detect([j.decoded.array for j in todo]) if todo else []
    by_id = {id(j): d for j, d in zip(todo, dets, strict=True)}
    return [_job_row(j, by_id.get(id(j)), detector, cfg, warned) for j in jobs]


def _run_chunk(jobs: list[_Job], detector: FaceDetector | None, cfg: FacesConfig,
               containers: Mapping[str, Any] | None = None,
               warned: dict[str, bool] | None = None) -> list[dict[str, Any]]:
    return _process_chunk(_decode_jobs(jobs, cfg, containers), detector, cfg, warned)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Set torch's intra-op thread count to ``n`` for the block, then restore it; ``None``
    leaves torch alone (and unimported: pre-aligned input runs without a detector)."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def iter_face_rows(rows: Sequence[Mapping[str, Any]], root: str | os.PathLike,
                   cfg: FacesConfig, detector: FaceDetector | None, *, workers: int = 1,
                   progress: bool = True, desc: str = "faces",
                   containers: Mapping[str, Any] | None = None
                   ) -> Iterator[list[dict[str, Any]]]:
    """Yield output rows, in input order, in chunks of ``cfg.batch_size``.

    ``rows`` carry ``image_id``, ``path`` (relative to ``root``), ``status`` and
    ``message`` (manifest columns). ``workers`` threads each take whole chunks (decode,
    detect, align, encode); torch, Pillow and zlib release the GIL, so chunks overlap.
    Output does not depend on ``workers``. Rows with usable ``given_landmarks``
    (:func:`facecast.faces.given.given_points`) are aligned with them; the others go to
    ``detector``. ``detector`` None means no detector: pre-aligned input (status
    ``aligned_input``), or ``no_landmarks`` where the dataset gives landmarks for other rows
    but not this one (``faces.detector: none``). ``containers`` (from the manifest's provenance) lets
    locator paths ``<file>#<index>`` of RecordIO / .bin datasets be read.
    """
    root = Path(root)
    containers = resolve_containers(containers or {}, root)  # relative to the root
    warned: dict[str, bool] = {}
    jobs = []
    for r in rows:
        raw_msg = r.get("message")
        status = str(r["status"])
        message = "" if raw_msg is None or raw_msg is pd.NA or raw_msg != raw_msg else str(raw_msg)
        path = locator = None
        if status == "ok" and containers and split_locator(str(r["path"]), containers):
            locator = str(r["path"])
        elif status == "ok":
            path = resolve_inside(root, str(r["path"]))
            if path is None:
                status, message = "outside_root", f"path escapes the dataset root {root}"
        has_given = "given_landmarks" in r
        jobs.append(_Job(str(r["image_id"]), status, message, path, locator=locator,
                         has_given=has_given,
                         landmarks=given_points(r["given_landmarks"]) if has_given else None,
                         score=r.get("given_score")))
    bs = cfg.batch_size
    chunks = [jobs[i:i + bs] for i in range(0, len(jobs), bs)]
    workers = max(1, int(workers))
    bar = tqdm(total=len(jobs), desc=desc, unit="img", file=sys.stderr, mininterval=10,
               disable=not progress)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for chunk in chunks:
            pending.append(pool.submit(_run_chunk, chunk, detector, cfg, containers, warned))
            if len(pending) >= 2 * workers:  # bounded read-ahead keeps memory flat
                done = pending.popleft().result()
                bar.update(len(done))
                yield done
        while pending:
            done = pending.popleft().result()
            bar.update(len(done))
            yield done
    bar.close()


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts with the faces columns) as an Arrow table with :data:`FACES_SCHEMA`."""
    # column by column: about twice as fast as Table.from_pylist on the main thread
    return pa.Table.from_arrays([pa.array([r.get(f.name) for r in rows], type=f.type)
                                 for f in FACES_SCHEMA], schema=FACES_SCHEMA)


def plan_rows(records: Sequence[Mapping[str, Any]], cfg: FacesConfig) -> Counter:
    """How many manifest rows take each path: ``given`` (usable given landmarks),
    ``detect`` (an ``ok`` row without them while ``faces.detector`` names a detector),
    ``aligned`` (pre-aligned input: ``faces.detector: none``, no given landmarks column),
    ``no_landmarks`` (the dataset gives landmarks for other rows, not this one, and
    ``faces.detector`` is none) and ``kept`` (a manifest status other than ``ok``), by
    :func:`landmark_path`, the rule the rows then run by. The detector is loaded only when
    ``detect`` is not zero."""
    detect = cfg.detector != "none"
    out: Counter = Counter()
    for r in records:
        has = "given_landmarks" in r
        out[landmark_path(str(r["status"]) == "ok", has,
                          has and given_points(r["given_landmarks"]) is not None, detect)] += 1
    return out


def _model_provenance(cfg: FacesConfig, detector: FaceDetector | None,
                      given: bool) -> dict[str, Any]:
    """Provenance ``model`` of a shard: the detector's settings, or why none was loaded."""
    if detector is not None:
        model = dict(detector.settings())
    elif cfg.detector == "none" and not given:
        return {"detector": "none", "aligned_as": cfg.aligned_as}
    elif cfg.detector == "none":
        model = {"detector": "none"}
    else:
        model = {"detector": "none", "configured_detector": cfg.detector,
                 "why": "no row of this shard needed detection"}
    if given:
        model["landmarks"] = "given by the dataset"
    return model


def _log_plan(shard: str, n: int, plan: Counter, cfg: FacesConfig,
              detector: FaceDetector | None, threads: int) -> None:
    """One log line saying how many rows take each path (:func:`plan_rows`)."""
    parts = []
    if plan["given"]:
        parts.append(f"{plan['given']} aligned with the dataset's landmarks (status "
                     f"{GIVEN_STATUS})")
    if plan["detect"] and detector is not None:
        parts.append(f"{plan['detect']} detected with {detector.name} on {detector.device}"
                     + (" (no usable given landmarks)" if plan["given"] or plan["no_landmarks"]
                        else ""))
    if plan["aligned"]:
        parts.append(f"{plan['aligned']} pre-aligned input (detector none, aligned_as "
                     f"{cfg.aligned_as})")
    if plan["kept"]:
        parts.append(f"{plan['kept']} keep their manifest status")
    log.info("faces shard %s: %d images: %s; %d worker threads", shard, n,
             "; ".join(parts) or "none", threads)
    if plan["no_landmarks"]:
        log.warning("faces shard %s: %d images have no usable given landmarks and "
                    "faces.detector is none: status %s (set faces.detector: mtcnn or yunet "
                    "to detect them)", shard, plan["no_landmarks"], NO_LANDMARKS)


def run_faces_shard(manifest_path: str | os.PathLike, shard: str, root: str | os.PathLike,
                    out_path: str | os.PathLike, config: Mapping[str, Any] | None = None, *,
                    provenance: Mapping[str, Any] | None = None,
                    detector: FaceDetector | None = None,
                    threads: int | None = None) -> dict[str, int]:
    """Detect and align faces for manifest shard ``shard``; write ``out_path``.

    Every manifest row of the shard gives one output row (columns :data:`FACES_SCHEMA`,
    manifest order). ``config`` is the ``faces`` config section; ``threads`` (default
    ``faces.threads``) worker threads share the work. Rows with usable given landmarks are
    aligned with them; the detector (``detector``, else the configured one) is loaded only
    when some row needs it (:func:`plan_rows`). On CPU each worker runs torch
    single-threaded: MTCNN is many small ops, and OpenMP threads on them cost more in
    synchronisation than they save (5-10x on a loaded machine), so workers parallelise
    across chunks instead. Returns status counts. Provenance ``landmark_plan`` (rows per
    path of :func:`plan_rows`) and the log (the plan, then the statuses and the
    ``landmark_source`` counts) say how many rows took each path.
    """
    cfg = FacesConfig.from_mapping(config)
    threads = cfg.threads if threads is None else int(threads)
    given = set(GIVEN_COLUMNS) <= set(pq.read_schema(manifest_path).names)
    manifest = read_shard(manifest_path, shard,
                          columns=["image_id", "path", "status", "message"]
                          + (list(GIVEN_COLUMNS) if given else []))
    containers = read_provenance(manifest_path).get("containers") or {}
    records = manifest.to_dict("records")
    plan = plan_rows(records, cfg)
    if not plan["detect"]:
        detector = None  # no row needs one: no detector (nor torch) is loaded
    else:
        detector = detector or (YuNetDetector(cfg) if cfg.detector == "yunet"
                                else FaceDetector(cfg))
    prov = dict(provenance or {})
    prov.update({"stage": "faces", "shard": shard, "faces_config": cfg.as_dict(),
                 "model": _model_provenance(cfg, detector, given),
                 "landmark_plan": {k: int(v) for k, v in sorted(plan.items())},
                 "dataset_root": portable_path(root)})  # relative as configured or to cwd
    counts: Counter = Counter()
    sources: Counter = Counter()
    buffer: list[dict[str, Any]] = []
    _log_plan(shard, len(records), plan, cfg, detector, threads)
    # a CPU detector runs torch single-threaded inside each worker thread; no detector, no torch
    intra = 1 if detector is not None and detector.device.type == "cpu" else None
    # on CUDA: fp32 without TF32 (facecast.faces.cuda_fp32), restored after
    fp32 = cuda_fp32(detector.device if detector is not None else "cpu")
    with torch_threads(intra), fp32, ParquetStreamWriter(
            out_path, FACES_SCHEMA, provenance=prov,
            # PNG bytes do not shrink under zstd; stored PNGs (level 0) do
            uncompressed=(("crop_arcface", "crop_facenet") if cfg.png_compress_level > 0
                          else ())) as writer:
        for chunk_rows in iter_face_rows(records, root, cfg, detector, workers=threads,
                                         desc=f"faces {shard}", containers=containers):
            counts.update(r["status"] for r in chunk_rows)
            sources.update(r.get("landmark_source") or "none" for r in chunk_rows)
            buffer.extend(chunk_rows)
            if len(buffer) >= ROWS_PER_GROUP:
                writer.write(rows_to_table(buffer))
                buffer = []
        if buffer or not records:
            writer.write(rows_to_table(buffer))
    log.info("faces shard %s: statuses %s; landmark sources %s", shard,
             dict(sorted(counts.items())), dict(sorted(sources.items())))
    return dict(counts)
