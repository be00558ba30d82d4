"""Detection rate per detector (MTCNN, YuNet) on real photos, native size and small.

Photos: the Yale face set (``--yale``, default ``../shared/fixtures/yale``: 15 people x 11,
320x243 grayscale; else the 20 in tests/data/yale) plus the four tests/data/faces
portraits. Sets:

  * ``native``: each photo as it is;
  * ``small k=K``: 92x112 grayscale portraits like the AT&T/ORL set (head and shoulders, the
    face filling most of the frame), one per photo and framing ``K`` in ``--framings``: a
    crop ``K`` inter-eye distances wide (aspect 92:112, eyes 42 % down, centred between the
    eyes; MTCNN's landmarks on the native photo place it), Lanczos-resampled to 92x112;
  * ``shrunk s=S`` (``--scales``): the whole photo Lanczos-shrunk by ``S`` (smaller faces
    with the background around them);
  * ``no faces``: images without a face (skimage's sample photos other than the astronaut,
    shorter side 64, 92, 128 and 180 px, and 40 92x112 noise images): "found" there counts
    false detections.

Per set and detector it prints faces found (>= 1 face) / images, the mean distance of the
best face's five landmarks from the reference (MTCNN's native landmarks carried into the
set's pixels) in inter-eye distances, and ms per image (one thread). YuNet runs once per
``--min-sides`` value (``faces.yunet.min_side``; 0 = never enlarged, the behaviour before
issue #31 part 5).

    .venv/bin/python benchmarks/detector_rate.py [--framings 2.4,3.0,3.6] [--scales 0.3,0.5]
    .venv/bin/python benchmarks/detector_rate.py --min-sides 0,160,192,224,256,288
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from facecast.faces.decode import read_image
from facecast.faces.detect import Detections, FaceDetector
from facecast.faces.stage import torch_threads
from facecast.faces.yunet import YuNetDetector

REPO = Path(__file__).resolve().parents[1]
SMALL = (92, 112)  # AT&T/ORL portrait size (width, height)


def load_photos(yale: Path) -> dict[str, np.ndarray]:
    """Yale photos from ``yale`` (tests/data/yale when it is missing) and the four
    tests/data/faces portraits, as RGB arrays keyed by a relative name."""
    if not yale.is_dir():
        print(f"{yale} not found: using tests/data")
        yale = REPO / "tests/data/yale"
    paths = sorted(yale.glob("*/*.gif")) + sorted((REPO / "tests/data/faces").glob("*/1.jpg"))
    return {f"{p.parent.name}/{p.name}": read_image(p).array for p in paths}


def portrait(img: np.ndarray, lm: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """92x112 grayscale (3 equal channels) crop ``k`` inter-eye distances wide around the
    eyes; also ``(x0, y0, sx, sy)``: pixel x of the photo is ``(x + 0.5 - x0) / sx - 0.5``
    in the crop (likewise y)."""
    centre = (lm[0] + lm[1]) / 2
    width = k * float(np.linalg.norm(lm[1] - lm[0]))
    height = width * SMALL[1] / SMALL[0]
    x0, y0 = centre[0] + 0.5 - width / 2, centre[1] + 0.5 - 0.42 * height
    pad = int(max(width, height))  # crops past the photo's edge repeat its border
    grey = np.pad(np.asarray(Image.fromarray(img).convert("L")), pad, mode="edge")
    box = (x0 + pad, y0 + pad, x0 + pad + width, y0 + pad + height)
    out = np.asarray(Image.fromarray(grey).resize(SMALL, Image.Resampling.LANCZOS, box=box))
    return np.repeat(out[:, :, None], 3, axis=2), np.array([x0, y0, width / SMALL[0],
                                                            height / SMALL[1]])


def shrunk(img: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """The photo Lanczos-shrunk by ``s``, with the same geometry tuple as :func:`portrait`."""
    h, w = img.shape[:2]
    nw, nh = round(w * s), round(h * s)
    out = np.asarray(Image.fromarray(img).resize((nw, nh), Image.Resampling.LANCZOS))
    return out, np.array([0.0, 0.0, w / nw, h / nh])


def carry(lm: np.ndarray, geo: np.ndarray) -> np.ndarray:
    """Photo landmarks (pixel indices) -> the derived image's pixel indices."""
    return (lm + 0.5 - geo[:2]) / geo[2:] - 0.5


def no_faces() -> list[np.ndarray]:
    """Images without a face: skimage sample photos at four sizes, and noise."""
    import skimage.data

    out = []
    for name in ("coffee", "chelsea", "rocket", "coins", "camera", "moon", "page", "text",
                 "clock", "hubble_deep_field", "immunohistochemistry", "horse", "brick",
                 "grass", "gravel", "cell", "colorwheel", "logo", "retina", "checkerboard"):
        img = np.asarray(getattr(skimage.data, name)())
        img = img if img.ndim == 3 else np.repeat(img[:, :, None], 3, axis=2)
        img = Image.fromarray(img[:, :, :3].astype(np.uint8))
        for side in (64, 92, 128, 180):
            s = side / min(img.size)
            out.append(np.asarray(img.resize((round(img.width * s), round(img.height * s)),
                                             Image.Resampling.LANCZOS)))
    rng = np.random.default_rng(0)
    return out + [rng.integers(0, 256, (112, 92, 3), dtype=np.uint8) for _ in range(40)]


def score(dets: list[Detections], refs: list[np.ndarray | None]) -> tuple[int, float]:
    """(images with >= 1 face, mean landmark error of the best face in inter-eye
    distances over those images that have a reference)."""
    errs = []
    for det, ref in zip(dets, refs, strict=True):
        if len(det) and ref is not None:
            iod = np.linalg.norm(ref[1] - ref[0])
            errs.append(np.linalg.norm(det.landmarks[0] - ref, axis=1).mean() / iod)
    return sum(len(d) > 0 for d in dets), float(np.mean(errs)) if errs else float("nan")


def run_set(name: str, imgs: list[np.ndarray], refs: list[np.ndarray | None],
            detectors: dict[str, Callable[[list[np.ndarray]], list[Detections]]]) -> None:
    """Print one line per detector for one set of images."""
    for label, detect in detectors.items():
        t = time.perf_counter()
        dets = [detect([img])[0] for img in imgs]
        ms = 1000 * (time.perf_counter() - t) / len(imgs)
        found, err = score(dets, refs)
        print(f"{name:<14} {label:<22} {found:>4}/{len(imgs):<4} {100 * found / len(imgs):6.1f} %"
              f"   lm err {err:.3f} iod   {ms:6.1f} ms/img", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yale", type=Path, default=REPO.parent / "shared/fixtures/yale")
    ap.add_argument("--framings", default="2.4,3.0,3.6",
                    help="crop widths of the 92x112 portraits, in inter-eye distances")
    ap.add_argument("--scales", default="", help="also shrink whole photos by these factors")
    ap.add_argument("--min-sides", default="0,224", help="faces.yunet.min_side values")
    args = ap.parse_args()
    photos = load_photos(args.yale)
    mtcnn = FaceDetector({"device": "cpu"})
    with torch_threads(1):
        native = mtcnn.detect(list(photos.values()))
    assert all(len(d) for d in native), "MTCNN places the crops: it must find every face"
    lms = [d.landmarks[0].astype(np.float64) for d in native]
    detectors: dict[str, Callable] = {"mtcnn": mtcnn.detect}
    for m in (int(v) for v in args.min_sides.split(",")):
        yunet = YuNetDetector({"detector": "yunet", "yunet": {"min_side": m}})
        detectors[f"yunet min_side={m}"] = yunet.detect
    print(f"{len(photos)} photos; found = images with >= 1 face; lm err: mean distance of "
          "the best face's 5 points from MTCNN's on the native photo, in inter-eye distances")
    sets = [("native", lambda img, _lm: (img, np.array([0.0, 0.0, 1.0, 1.0])))]
    sets += [(f"small k={k}", lambda img, lm, k=float(k): portrait(img, lm, k))
             for k in args.framings.split(",") if k]
    sets += [(f"shrunk s={s}", lambda img, _lm, s=float(s): shrunk(img, s))
             for s in args.scales.split(",") if s]
    with torch_threads(1):
        for name, make in sets:
            made = [make(img, lm) for img, lm in zip(photos.values(), lms, strict=True)]
            refs = [carry(lm, geo) for lm, (_, geo) in zip(lms, made, strict=True)]
            run_set(name, [img for img, _ in made], refs, detectors)
        negatives = no_faces()
        run_set("no faces", negatives, [None] * len(negatives), detectors)


if __name__ == "__main__":
    main()
