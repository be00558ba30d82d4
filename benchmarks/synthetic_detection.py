"""Benchmark the synthetic demo dataset: generation speed, MTCNN detection, planted effects.

Generates ``--identities`` x ``--images`` synthetic faces into a temporary folder (timed),
runs facecast's MTCNN detector (:class:`facecast.faces.detect.FaceDetector`, default faces
settings, CPU) over every image, aligns the largest face to the ArcFace crop
(:func:`facecast.faces.align.align_arcface`) and prints the detection rate overall and by
covariate bins (blur, yaw, illumination, glasses, skin, the planted low-contrast group).

With ``--lbp`` and/or ``--dlib`` it embeds the crops with the real backends (``lbp``:
:class:`facecast.embed.lbp.LBPEmbedder` with the PCA whitening fitted on the train
identities, as rule ``embed_fit`` does; ``dlib``: :class:`facecast.embed.dlib_resnet.
DlibEmbedder`) and prints, per demographic group (sex x skin), the ChaLearn FairFace 2020
positive-pair AUC (the group's genuine pairs of test identities scored against ALL impostor
pairs, cosine similarity). The planted low-contrast group (dark-skinned women) should have
the lowest.

    .venv/bin/python benchmarks/synthetic_detection.py --identities 80 --images 6 --lbp --dlib
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from facecast.datasets.synthetic.generate import generate_dataset
from facecast.embed.lbp import CovarianceAccumulator, LBPEmbedder, fit_whitening
from facecast.faces.align import align_arcface
from facecast.faces.detect import FaceDetector, select_face


def detect_and_align(root: Path, paths: list[str], batch: int) -> tuple[np.ndarray, np.ndarray]:
    """MTCNN over every image; returns (found mask, ArcFace crops (N, 112, 112, 3) uint8;
    zeros where no face was found)."""
    detector = FaceDetector({"device": "cpu", "batch_size": batch})
    found = np.zeros(len(paths), bool)
    crops = np.zeros((len(paths), 112, 112, 3), np.uint8)
    for i in range(0, len(paths), batch):
        imgs = [np.asarray(Image.open(root / p).convert("RGB")) for p in paths[i:i + batch]]
        for j, (img, det) in enumerate(zip(imgs, detector.detect(imgs), strict=True)):
            k = select_face(det, "largest", img.shape[1], img.shape[0])
            if k is not None:
                found[i + j] = True
                crops[i + j] = align_arcface(img, det.landmarks[k])
    return found, crops


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a random positive > a random negative) (ties count half)."""
    allv = np.concatenate([pos, neg])
    ranks = pd.Series(allv).rank().to_numpy()
    r_pos = ranks[: len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def lbp_embeddings(crops: np.ndarray, train: np.ndarray) -> np.ndarray:
    """facecast's LBP features whitened by a PCA fitted on the ``train`` rows."""
    embedder = LBPEmbedder("lbp")
    feats = embedder.features(crops)
    acc = CovarianceAccumulator(embedder.dim)
    acc.update(feats[train])
    fit = fit_whitening(acc, pca_dim=128)
    return (feats - fit["mean"]) @ fit["projection"]


def dlib_embeddings(crops: np.ndarray) -> np.ndarray:
    """dlib ResNet descriptors of the ArcFace crops (chips resampled as the backend does)."""
    from facecast.embed.dlib_resnet import DlibEmbedder

    embedder = DlibEmbedder("dlib")
    out = [embedder.embed(torch.from_numpy(crops[i:i + 64])) for i in range(0, len(crops), 64)]
    return np.concatenate(out) if out else np.zeros((0, 128), np.float32)


def group_report(name: str, table: pd.DataFrame, emb: np.ndarray, keep: np.ndarray) -> dict:
    """Print and return per-group positive-pair AUC (group genuine vs all impostor pairs)."""
    sub = table[keep].reset_index(drop=True)
    e = emb[keep].astype(np.float64)
    e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    sim = e @ e.T
    iu = np.triu_indices(len(sub), 1)
    ident = sub["identity"].to_numpy()
    same = ident[iu[0]] == ident[iu[1]]
    scores = sim[iu]
    group = (np.where(sub["label_male"] == 1, "male", "female").astype(object) + "_"
             + np.where(sub["label_dark_skin"] == 1, "dark", "light").astype(object))
    g0 = group[iu[0]]
    neg = scores[~same]
    print(f"{name} verification ({len(sub)} test faces, {same.sum()} genuine pairs): "
          f"overall AUC {auc(scores[same], neg):.3f}, impostor mean {neg.mean():.3f}")
    out = {}
    for g in sorted(set(group)):
        pos = scores[same & (g0 == g)]
        if len(pos) == 0:
            continue
        out[g] = auc(pos, neg)
        n_id = len(set(ident[group == g]))
        print(f"  {g:13s} {n_id:3d} ids  genuine pairs {len(pos):5d}  mean genuine "
              f"{pos.mean():.3f}  AUC(group positives vs all negatives) {out[g]:.3f}")
    lowest = min(out, key=out.get)
    rest = sorted(v for k, v in out.items() if k != lowest)
    print(f"  lowest: {lowest} (margin to the next group {rest[0] - out[lowest]:.3f})")
    return out


def rate_table(name: str, values: pd.Series, found: np.ndarray, bins) -> None:
    cut = pd.cut(values, bins=bins, include_lowest=True)
    tab = pd.DataFrame({"bin": cut, "found": found}).groupby("bin", observed=True)["found"]
    print(f"detection rate by {name}:")
    for b, s in tab:
        print(f"  {str(b):20s} {s.mean():6.3f}  (n={len(s)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--identities", type=int, default=80)
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=20231)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lbp", action="store_true", help="per-group AUC with the lbp backend")
    ap.add_argument("--dlib", action="store_true", help="per-group AUC with the dlib backend")
    args = ap.parse_args()
    torch.set_num_threads(args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        table = generate_dataset(root, seed=args.seed, n_jobs=args.jobs,
                                 n_identities=args.identities,
                                 images_per_identity=args.images, image_size=args.size)
        gen_s = time.perf_counter() - t0
        n = len(table)
        print(f"generated {n} images ({args.identities} identities x {args.images}, "
              f"{args.size} px) in {gen_s:.2f} s with {args.jobs} process(es): "
              f"{1000 * gen_s / n:.1f} ms/image")
        t0 = time.perf_counter()
        found, crops = detect_and_align(root, table["path"].tolist(), args.batch)
        det_s = time.perf_counter() - t0
        print(f"MTCNN (facecast faces defaults) on {n} images in {det_s:.1f} s")
        print(f"detection rate overall: {found.mean():.3f}")
        rate_table("blur (sigma px @224)", table["label_blur"], found, [0, 0.8, 1.5, 2.5, 3.5])
        rate_table("|yaw| (deg)", table["label_yaw"].abs(), found, [0, 10, 20, 25])
        rate_table("illumination", table["label_illumination"], found, [0.55, 0.75, 1.0, 1.25])
        rate_table("glasses", table["label_glasses"], found, [-0.5, 0.5, 1.5])
        rate_table("skin tone", table["label_skin_tone"], found, [0, 0.25, 0.5, 0.75, 1.0])
        rate_table("low-contrast group", table["label_low_contrast_group"], found,
                   [-0.5, 0.5, 1.5])
        exclude = table["exclude"].to_numpy()
        keep = found & ~exclude
        if args.lbp:
            t0 = time.perf_counter()
            emb = lbp_embeddings(crops, found & exclude)
            print(f"lbp features + whitening in {time.perf_counter() - t0:.1f} s")
            group_report("lbp", table, emb, keep)
        if args.dlib:
            t0 = time.perf_counter()
            emb = dlib_embeddings(crops)
            print(f"dlib descriptors in {time.perf_counter() - t0:.1f} s")
            group_report("dlib", table, emb, keep)


if __name__ == "__main__":
    main()
