"""Verification accuracy of dlib and SFace on the real Yale face set, all pairs.

The Yale Face Database (Belhumeur, Hespanha, Kriegman 1997; 15 people x 11 photos, 164
GIFs, ``../shared/fixtures/yale`` on the development machines, ``--yale`` elsewhere) is
detected with MTCNN and with YuNet; every photo's ArcFace crop is embedded by

  * dlib's ResNet (backend ``dlib_resnet``) on the MTCNN crops,
  * SFace (backend ``sface``) on the MTCNN crops (same crops as dlib) and on the YuNet crops,
  * dlib on the YuNet crops,

and every pair of photos is scored by cosine. Printed per model: photos embedded, genuine
and impostor pairs, AUC, TAR at FAR = 1e-2 and 1e-3, EER, and a 95% identity-clustered
bootstrap band of the AUC (and of the paired AUC difference SFace - dlib on the same
crops). Comparisons run on the photos that both detectors found (the figures say how many).

``--align-check`` also compares our ArcFace crop with OpenCV's own ``alignCrop`` on the same
YuNet landmarks (mean absolute pixel difference, cosine of the SFace features), on Yale and
on the four portraits in tests/data/faces.

    .venv/bin/python benchmarks/yale_auc.py [--yale ../shared/fixtures/yale] [--align-check]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from facecast.embed.dlib_resnet import DlibEmbedder
from facecast.embed.sface import SFaceEmbedder
from facecast.evaluate.metrics import auc_score, equal_error_rate, roc_points, tar_at_far
from facecast.evaluate.resample import identity_weights
from facecast.faces.align import align_arcface
from facecast.faces.decode import read_image
from facecast.faces.detect import Detections, FaceDetector, select_face
from facecast.faces.yunet import YuNetDetector

REPO = Path(__file__).resolve().parents[1]
DEFAULT_YALE = REPO.parent / "shared" / "fixtures" / "yale"


def load_yale(root: Path) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """(relative paths, identity per photo, RGB arrays) of every ``subjectNN/*.gif``."""
    paths = sorted(p for p in root.glob("subject*/*") if p.is_file())
    images = [read_image(p).array for p in paths]
    ids = np.array([p.parent.name for p in paths])
    return [str(p.relative_to(root)) for p in paths], ids, images


def crops_of(images: list[np.ndarray], dets: list[Detections]) -> tuple[np.ndarray, np.ndarray]:
    """(found mask, ArcFace crops (n, 112, 112, 3), zeros where no face) of the largest face."""
    found = np.zeros(len(images), bool)
    crops = np.zeros((len(images), 112, 112, 3), np.uint8)
    for i, (img, det) in enumerate(zip(images, dets, strict=True)):
        k = select_face(det, "largest", img.shape[1], img.shape[0])
        if k is not None:
            found[i] = True
            crops[i] = align_arcface(img, det.landmarks[k])
    return found, crops


def all_pairs(emb: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray]:
    """Cosine scores, labels and identities (a, b) of every unordered pair of rows."""
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    i, j = np.triu_indices(len(e), k=1)
    return (e[i] * e[j]).sum(1), (ids[i] == ids[j]).astype(np.int8), ids[i], ids[j]


def weighted_auc(scores: np.ndarray, labels: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUC per weight row of ``w`` (B, n_pairs); tied scores count half."""
    order = np.argsort(scores, kind="stable")
    s, y, w = scores[order], labels[order].astype(bool), w[:, order]
    wi = np.where(y[None, :], 0.0, w)
    wg = np.where(y[None, :], w, 0.0)
    _, start, counts = np.unique(s, return_index=True, return_counts=True)
    below = np.c_[np.zeros((len(w), 1)), np.cumsum(wi, axis=1)][:, np.repeat(start, counts)]
    tie = np.repeat(np.add.reduceat(wi, start, axis=1), counts, axis=1)
    return (wg * (below + 0.5 * tie)).sum(1) / (wg.sum(1) * wi.sum(1))


def missed_conditions(scores: np.ndarray, labels: np.ndarray, cond: np.ndarray) -> str:
    """How often each photo condition occurs in the genuine pairs rejected at FAR = 1e-2."""
    far, tar, thr = roc_points(scores, labels)
    t = tar_at_far(far, tar, thr, 1e-2, int((labels == 0).sum()))["threshold"]
    i, j = np.triu_indices(len(cond), k=1)
    miss = (labels == 1) & (scores < t)
    counts = pd.Series(np.r_[cond[i[miss]], cond[j[miss]]]).value_counts()
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """AUC, TAR at FAR 1e-2 and 1e-3, EER."""
    far, tar, thr = roc_points(scores, labels)
    n_imp = int((labels == 0).sum())
    return {"auc": auc_score(scores, labels),
            "tar@1e-2": tar_at_far(far, tar, thr, 1e-2, n_imp)["tar"],
            "tar@1e-3": tar_at_far(far, tar, thr, 1e-3, n_imp)["tar"],
            "eer": equal_error_rate(far, tar, thr)[0]}


def align_check(yale_images: list[np.ndarray], yunet: YuNetDetector, sface: SFaceEmbedder
                ) -> None:
    """Our ArcFace crop vs ``cv2.FaceRecognizerSF.alignCrop`` on the same YuNet landmarks."""
    portraits = [read_image(p).array for p in sorted((REPO / "tests/data/faces").glob("*/*.jpg"))]
    for name, imgs in (("yale", yale_images), ("tests/data/faces portraits", portraits)):
        diffs, coss, eyes = [], [], []
        for img in imgs:
            det = yunet.detect_one(img)
            if len(det) == 0:
                continue
            bgr = np.ascontiguousarray(img[:, :, ::-1])
            row = np.r_[det.boxes[0, :2], det.boxes[0, 2:] - det.boxes[0, :2],
                        det.landmarks[0].reshape(-1), det.scores[0]].astype(np.float32)
            ref = sface.model.alignCrop(bgr, row[None])
            ours = np.ascontiguousarray(align_arcface(img, det.landmarks[0])[:, :, ::-1])
            a, b = sface.embed_bgr(np.stack([ref, ours]))
            diffs.append(np.abs(ref.astype(int) - ours.astype(int)).mean())
            coss.append(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
            eyes.append(float(np.linalg.norm(det.landmarks[0, 1] - det.landmarks[0, 0])))
        print(f"{name}: {len(diffs)} faces, inter-eye {min(eyes):.0f}-{max(eyes):.0f} px; "
              f"mean |ours - alignCrop| {np.mean(diffs):.2f} grey levels (max per face "
              f"{np.max(diffs):.2f}); SFace cosine(ours, alignCrop) min {np.min(coss):.4f} "
              f"mean {np.mean(coss):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--yale", type=Path, default=DEFAULT_YALE)
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--align-check", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    paths, ids, images = load_yale(args.yale)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"{len(images)} Yale photos of {len(set(ids))} people from {args.yale}")

    mtcnn = FaceDetector({"device": "cpu"})
    yunet = YuNetDetector({"detector": "yunet"}, threads=args.threads)
    found, crops = {}, {}
    for name, det in (("mtcnn", mtcnn), ("yunet", yunet)):
        t = time.perf_counter()
        dets = det.detect(images)
        dt = time.perf_counter() - t
        found[name], crops[name] = crops_of(images, dets)
        print(f"{name}: faces found in {found[name].sum()}/{len(images)} photos "
              f"({len(images) / dt:.0f} img/s in this loop)")

    dlib = DlibEmbedder("dlib")
    sface = SFaceEmbedder("sface", threads=args.threads)
    both = found["mtcnn"] & found["yunet"]
    sel_ids = ids[both]
    runs = {"dlib on MTCNN crops": (dlib, "mtcnn"), "SFace on MTCNN crops": (sface, "mtcnn"),
            "dlib on YuNet crops": (dlib, "yunet"), "SFace on YuNet crops": (sface, "yunet")}
    scores = {}
    cond = np.array([Path(p).stem for p in paths])[both]
    print(f"all pairs of the {both.sum()} photos both detectors found "
          f"(identity-bootstrap 95% band of the AUC, {args.n_boot} replicates):")
    rng = np.random.default_rng(0)
    weights = None
    for label, (model, det_name) in runs.items():
        t = time.perf_counter()
        emb = model.embed(torch.from_numpy(crops[det_name][both]))
        dt = time.perf_counter() - t
        s, y, ia, ib = all_pairs(emb, sel_ids)
        if weights is None:
            weights = np.concatenate(list(identity_weights(ia, ib, args.n_boot, rng, 250)))
        scores[label] = s
        m = metrics(s, y)
        band = np.percentile(weighted_auc(s, y, weights), [2.5, 97.5])
        print(f"  {label:22s} {int(y.sum())} genuine / {int((1 - y).sum())} impostor pairs: "
              f"AUC {m['auc']:.4f} [{band[0]:.4f}, {band[1]:.4f}]  TAR@FAR=1e-2 "
              f"{m['tar@1e-2']:.3f}  TAR@FAR=1e-3 {m['tar@1e-3']:.3f}  EER {m['eer']:.4f}  "
              f"({len(emb) / dt:.0f} faces/s)")
        print(f"    genuine cosine mean {s[y == 1].mean():.3f} min {s[y == 1].min():.3f}; "
              f"impostor mean {s[y == 0].mean():.3f} max {s[y == 0].max():.3f}; genuine "
              f"pairs rejected at FAR=1e-2, by photo condition: "
              f"{missed_conditions(s, y, cond) or 'none'}")
    for det_name in ("MTCNN", "YuNet"):
        d = (weighted_auc(scores[f"SFace on {det_name} crops"], y, weights)
             - weighted_auc(scores[f"dlib on {det_name} crops"], y, weights))
        lo, hi = np.percentile(d, [2.5, 97.5])
        diff = (auc_score(scores[f"SFace on {det_name} crops"], y)
                - auc_score(scores[f"dlib on {det_name} crops"], y))
        print(f"  AUC SFace - dlib on {det_name} crops: {diff:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    if args.align_check:
        align_check(images, yunet, sface)


if __name__ == "__main__":
    main()
