"""Speed of the faces stage on CPU: detection, warping, PNG encoding, and a whole shard.

Prints per-image wall and CPU milliseconds for
  * facenet-pytorch's own ``MTCNN.detect`` (the reference) vs ``FaceDetector.detect`` on
    512 px photos (grace_hopper.jpg, astronaut) and a 2048 px portrait (shrunk to max_side),
  * torch intra-op threads 1 vs 2 (why the stage runs MTCNN single-threaded per worker),
  * one ArcFace warp by PIL affine (used) vs skimage.transform.warp vs torch grid_sample,
  * PNG encoding of both crops at the configured level,
  * ``run_faces_shard`` end to end on ``--n`` copies of the photos (decode + detect + align +
    encode + Parquet) with 1 and 2 worker threads.
  * pre-aligned input (``faces.detector: none``): ``run_faces_shard`` on ``--aligned-n``
    112 px JPEG crops, from files and from a RecordIO set (decode + both crops + PNG +
    Parquet), 1 and 2 worker threads, in images/s.
Goals: MTCNN path, per-image cost near MTCNN's own on a 512 px photo (~60 ms on one idle
core here); aligned input, >= 1,500 images/s per job on 2 cores (a 10k shard in < 10 s).

``--yale [DIR]`` instead compares the detectors on the real Yale face set (164 photos,
default ``../shared/fixtures/yale``): ``run_faces_shard`` with ``faces.detector`` mtcnn and
yunet (``--detector`` picks one), 1 and 2 worker threads, printing faces found / images,
statuses and images/s.

    .venv/bin/python benchmarks/faces_speed.py [--n 64] [--repeat 5] [--aligned-n 4000]
    .venv/bin/python benchmarks/faces_speed.py --aligned-only
    .venv/bin/python benchmarks/faces_speed.py --yale [--detector yunet]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import skimage.data
import torch
from matplotlib import cbook
from PIL import Image

from facecast.datasets.manifest import finalize_manifest, write_manifest
from facecast.datasets.recordio import pack, write_recordio
from facecast.datasets.stage import build_manifest
from facecast.faces.align import ARCFACE_TEMPLATE_112, align_arcface, similarity_transform
from facecast.faces.crops import encode_png
from facecast.faces.decode import read_image
from facecast.faces.detect import FaceDetector
from facecast.faces.stage import run_faces_shard, torch_threads

REPO = Path(__file__).resolve().parents[1]


def timed(fn, repeat: int) -> tuple[float, float]:
    """(best wall ms, best CPU ms) over ``repeat`` calls after one warm-up."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return 1000 * min(walls), 1000 * min(cpus)


def aligned_input_speed(n: int) -> None:
    """Images/s of the faces stage with ``detector: none`` on ``n`` 112 px JPEG crops."""
    astro = skimage.data.astronaut()
    det = FaceDetector({"device": "cpu"})
    crop = align_arcface(astro, det.detect([astro])[0].landmarks[0])
    rng = np.random.default_rng(0)
    jpegs = []
    for i in range(64):  # 64 distinct crops (brightness, flips), reused round-robin
        img = np.clip(crop.astype(np.int16) + rng.integers(-40, 40), 0, 255).astype(np.uint8)
        img = img[:, ::-1] if i % 2 else img
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(img)).save(buf, "JPEG", quality=90)
        jpegs.append(buf.getvalue())
    print(f"== pre-aligned input (detector none) on {n} 112 px JPEG crops: images/s ==")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "root"
        (root / "id").mkdir(parents=True)
        paths = []
        for i in range(n):
            p = f"id/{i:06d}.jpg"
            (root / p).write_bytes(jpegs[i % 64])
            paths.append(p)
        manifest = finalize_manifest(pd.DataFrame({"path": paths, "identity": "x"}), root,
                                     shard_size=n)
        write_manifest(manifest, tmp / "files.parquet", shard_size=n)
        write_recordio(tmp / "t.rec", tmp / "t.idx",
                       [(i + 1, pack(float(i % 100), jpegs[i % 64])) for i in range(n)])
        build_manifest({"kind": "recordio", "rec": str(tmp / "t.rec"), "shard_size": n},
                       tmp, tmp / "rec.parquet")
        both, arc = ("arcface", "facenet"), ("arcface",)
        runs = [("files", 1, 1, both), ("files", 2, 1, both), ("recordio", 1, 1, both),
                ("recordio", 2, 1, both), ("recordio", 2, 0, both), ("files", 2, 1, arc),
                ("recordio", 2, 1, arc)]
        for source, workers, level, crops in runs:
            mpath = tmp / ("files.parquet" if source == "files" else "rec.parquet")
            w, c = time.perf_counter(), time.process_time()
            counts = run_faces_shard(mpath, "00000", root if source == "files" else tmp,
                                     tmp / "out.parquet",
                                     {"detector": "none", "png_compress_level": level,
                                      "crops": list(crops)},
                                     threads=workers)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            print(f"{source:8s} crops {'+'.join(crops):15s} workers {workers} png level "
                  f"{level}: {n / wall:6.0f} img/s "
                  f"wall ({1000 * wall / n:.3f} ms/img, {1000 * cpu / n:.3f} ms/img cpu)  "
                  f"{counts}")


def yale_speed(root: Path, detectors: list[str], repeat: int) -> None:
    """Detection rate and images/s of the faces stage per detector on the Yale photos."""
    import pyarrow.parquet as pq

    paths = sorted(str(p.relative_to(root)) for p in root.glob("subject*/*") if p.is_file())
    print(f"== faces stage on {len(paths)} Yale photos ({root}); {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}; best of {repeat} ==")
    images = [read_image(root / p).array for p in paths]
    for name in detectors:  # the detector alone, on decoded images, one thread
        if name == "yunet":
            from facecast.faces.yunet import YuNetDetector

            det = YuNetDetector({"detector": "yunet"}, threads=1)
        else:
            det = FaceDetector({"device": "cpu"})
        with torch_threads(1):
            r = timed(lambda det=det: det.detect(images), repeat)
        found = sum(len(d) > 0 for d in det.detect(images))
        print(f"{name:6s} detect() alone, 1 thread: {r[0] / len(images):6.1f} ms/img wall, "
              f"{r[1] / len(images):6.1f} ms/img cpu, {1000 * len(images) / r[0]:6.1f} img/s; "
              f"faces found in {found}/{len(images)} images")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ids = [p.split("/")[0] for p in paths]
        manifest = finalize_manifest(pd.DataFrame({"path": paths, "identity": ids}), root,
                                     shard_size=len(paths))
        write_manifest(manifest, tmp / "m.parquet", shard_size=len(paths))
        for name in detectors:
            for workers in (1, 2):
                cfg = {"detector": name, "device": "cpu"}
                walls = []
                for _ in range(repeat):
                    w = time.perf_counter()
                    counts = run_faces_shard(tmp / "m.parquet", "00000", root,
                                             tmp / "out.parquet", cfg, threads=workers)
                    walls.append(time.perf_counter() - w)
                out = pq.read_table(tmp / "out.parquet", columns=["n_faces"]).to_pandas()
                found = int((out["n_faces"].fillna(0) > 0).sum())
                print(f"{name:6s} workers {workers}: faces found in {found}/{len(out)} "
                      f"images, {len(paths) / min(walls):6.1f} img/s (whole shard: decode, "
                      f"detect, align, PNG, Parquet; model load included)  {counts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="images in the end-to-end shard")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--aligned-n", type=int, default=4000,
                    help="112 px crops in the pre-aligned-input shard")
    ap.add_argument("--aligned-only", action="store_true",
                    help="only the pre-aligned input figures")
    ap.add_argument("--yale", nargs="?", type=Path, const=REPO.parent / "shared/fixtures/yale",
                    help="compare the detectors on the Yale photos in this folder")
    ap.add_argument("--detector", choices=["mtcnn", "yunet"], action="append",
                    help="with --yale: only this detector (repeatable; default both)")
    args = ap.parse_args()
    if args.yale is not None:
        yale_speed(args.yale, args.detector or ["mtcnn", "yunet"], min(args.repeat, 3))
        return
    if args.aligned_only:
        aligned_input_speed(args.aligned_n)
        return

    from facenet_pytorch import MTCNN

    grace = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    astro = skimage.data.astronaut()
    photos = {"grace_hopper 512x600": grace, "astronaut 512x512": astro}
    big = REPO / "tests/data/faces/shea_whigham/1.jpg"
    if big.is_file():
        photos["portrait 640x622"] = read_image(big).array
    det = FaceDetector({"device": "cpu"})
    ref = MTCNN(keep_all=True, device="cpu", min_face_size=20)

    print(f"== detection, ms per image (best of {args.repeat}; wall / cpu) ==")
    for threads in (1, 2):
        with torch_threads(threads):
            for name, img in photos.items():
                pil = Image.fromarray(img)
                r = timed(lambda pil=pil: ref.detect(pil, landmarks=True), args.repeat)
                o = timed(lambda img=img: det.detect([img]), args.repeat)
                print(f"torch threads {threads}  {name:22s} facenet MTCNN {r[0]:7.1f} / "
                      f"{r[1]:7.1f}   FaceDetector {o[0]:7.1f} / {o[1]:7.1f}")

    print("== one ArcFace warp of the astronaut, ms (wall / cpu) ==")
    lms = det.detect([astro])[0].landmarks[0]
    m = similarity_transform(lms, ARCFACE_TEMPLATE_112)
    r = timed(lambda: align_arcface(astro, lms), 50)
    print(f"PIL affine (used)        {r[0]:7.3f} / {r[1]:7.3f}")
    from skimage.transform import SimilarityTransform, warp

    tform = SimilarityTransform(np.vstack([m, [0, 0, 1]]))
    r = timed(lambda: warp(astro, tform.inverse, output_shape=(112, 112), order=1), 50)
    print(f"skimage.transform.warp   {r[0]:7.3f} / {r[1]:7.3f}")
    import torch.nn.functional as F

    src = torch.from_numpy(astro).permute(2, 0, 1)[None].float()

    def grid_sample() -> torch.Tensor:
        inv = np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2]
        yy, xx = np.mgrid[0:112, 0:112]
        sx = inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]
        sy = inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]
        grid = np.stack([2 * sx / (astro.shape[1] - 1) - 1, 2 * sy / (astro.shape[0] - 1) - 1],
                        -1)
        out = F.grid_sample(src, torch.from_numpy(grid[None]).float(), align_corners=True)
        return out[0].permute(1, 2, 0).round().clamp(0, 255).byte()

    r = timed(grid_sample, 50)
    print(f"torch grid_sample        {r[0]:7.3f} / {r[1]:7.3f}  (batched on GPU it wins)")
    crop = align_arcface(astro, lms)
    for level in (1, 6):
        r = timed(lambda level=level: encode_png(crop, level), 50)
        print(f"PNG encode 112 px lvl {level}  {r[0]:7.3f} / {r[1]:7.3f}  "
              f"{len(encode_png(crop, level))} bytes")

    print(f"== run_faces_shard on {args.n} images (512-600 px photos, JPEG) ==")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        paths = []
        for i in range(args.n):
            img = (grace, astro)[i % 2]
            p = f"img{i:04d}.jpg"
            Image.fromarray(np.ascontiguousarray(img if i % 4 < 2 else img[:, ::-1])).save(
                root / p, quality=90)
            paths.append(p)
        manifest = finalize_manifest(pd.DataFrame({"path": paths, "identity": "x"}), root,
                                     shard_size=args.n)
        write_manifest(manifest, Path(tmp) / "m.parquet", shard_size=args.n)
        for workers in (1, 2):
            w, c = time.perf_counter(), time.process_time()
            counts = run_faces_shard(Path(tmp) / "m.parquet", "00000", root,
                                     Path(tmp) / "out.parquet", {"device": "cpu"},
                                     detector=det, threads=workers)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            print(f"workers {workers}: {1000 * wall / args.n:6.1f} ms/image wall, "
                  f"{1000 * cpu / args.n:6.1f} ms/image cpu, {args.n / wall:5.1f} img/s  "
                  f"{counts}")
    aligned_input_speed(args.aligned_n)


if __name__ == "__main__":
    main()
