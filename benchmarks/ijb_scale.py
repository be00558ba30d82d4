"""IJB-C 1:1 at full scale: pooling + streamed pair scoring + the TAR table, time and memory.

IJB-C's 1:1 protocol has 227,630 images in 23,124 templates and 15,658,489 template pairs
(19,557 genuine). From synthetic precomputed 512-D raw image features of that shape
(3,531 subjects; templates of 1-40 images in 1-8 media; faceness scores) this times what
the ``templates_verify`` job does after reading the features: insightface's pooling
(:func:`facecast.templates.build.build_templates`), streamed scoring
(:func:`facecast.templates.stage.score_template_pairs`) and the TAR table
(:func:`facecast.templates.verify.tar_table`). Goal: < 60 s and < 4 GB peak on 2 CPU cores;
no pairs x 512 array is ever made. Also times the naive per-pair Python loop on a sample
and prints the ratio.

Quick by default (a tenth of the shape); ``--full`` for IJB-C's.

Run: PYTHONPATH=src .venv/bin/python benchmarks/ijb_scale.py [--full] [--threads 2]
     [--precision float64|float32]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

IJBC = {"images": 227_630, "templates": 23_124, "pairs": 15_658_489, "genuine": 19_557,
        "subjects": 3_531}


def _peak_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def synthetic(shape: dict[str, int], dim: int, seed: int):
    """(members, feature ids, raw features, pairs) of the given shape."""
    rng = np.random.default_rng(seed)
    n_img, n_t, n_s = shape["images"], shape["templates"], shape["subjects"]
    t_subject = np.sort(rng.integers(0, n_s, n_t))
    # every template gets one image, the rest spread at random
    tid = np.r_[np.arange(n_t), rng.integers(0, n_t, n_img - n_t)]
    tid.sort()
    mid = tid * 8 + rng.integers(0, 8, n_img)
    centres = rng.standard_normal((n_s, dim), dtype=np.float32)
    raw = centres[t_subject[tid]]
    raw += 8.0 * rng.standard_normal((n_img, dim), dtype=np.float32)
    raw *= rng.uniform(5, 30, n_img).astype(np.float32)[:, None]  # raw norms
    ids = np.array([f"loose_crop/{i}.jpg" for i in range(n_img)])
    members = pd.DataFrame({"image_id": ids, "template_id": tid, "media_id": mid,
                            "faceness": rng.uniform(0.5, 1.0, n_img)})
    # genuine: template pairs of one subject; impostors: random pairs of two subjects
    by_subj = pd.Series(np.arange(n_t)).groupby(t_subject).apply(list)
    gen = [(a, b) for ts in by_subj for i, a in enumerate(ts) for b in ts[i + 1:]]
    gen = np.array(gen, np.int64)[rng.permutation(len(gen))[:shape["genuine"]]]
    n_imp = shape["pairs"] - len(gen)
    ia, ib = rng.integers(0, n_t, n_imp), rng.integers(0, n_t, n_imp)
    same = t_subject[ia] == t_subject[ib]
    ib[same] = (ib[same] + rng.integers(1, n_t, same.sum())) % n_t  # a few stay same-subject
    lab = np.r_[np.ones(len(gen), np.int8), (t_subject[ia] == t_subject[ib]).astype(np.int8)]
    pairs = pd.DataFrame({"template_a": np.r_[gen[:, 0], ia], "template_b": np.r_[gen[:, 1], ib],
                          "label": lab})
    return members, ids, raw, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="IJB-C's full 1:1 shape")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="float64", choices=["float64", "float32"])
    ap.add_argument("--naive-sample", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    from threadpoolctl import threadpool_limits

    from facecast.templates.build import build_templates
    from facecast.templates.stage import score_template_pairs
    from facecast.templates.verify import tar_table

    shape = dict(IJBC) if args.full else {k: max(1, v // 10) for k, v in IJBC.items()}
    t = time.perf_counter()
    members, ids, raw, pairs = synthetic(shape, args.dim, args.seed)
    print(f"synthetic IJB-C shape: {len(members):,} images, {shape['templates']:,} templates, "
          f"{len(pairs):,} pairs ({int(pairs['label'].sum()):,} genuine), {args.dim}-D "
          f"(made in {time.perf_counter() - t:.1f} s; inputs {_peak_mb():.0f} MB peak RSS)")
    cfg = {"precision": args.precision}
    with threadpool_limits(args.threads):
        _reset_peak()
        base = _peak_mb()
        c0 = time.process_time()
        t0 = time.perf_counter()
        table, pooled = build_templates(members, ids, raw, cfg)
        t1 = time.perf_counter()
        scores, status = score_template_pairs(pairs, pooled.template_ids, pooled.features,
                                              {"block_templates": 1024, **cfg})
        t2 = time.perf_counter()
        tab = tar_table(scores[status == 0], pairs["label"].to_numpy()[status == 0])
        t3 = time.perf_counter()
        cpu = time.process_time() - c0
        peak = _peak_mb()
    total = t3 - t0
    print(f"pooling {t1 - t0:.1f} s, scoring {t2 - t1:.1f} s ({args.precision}), TAR table "
          f"{t3 - t2:.1f} s: total {total:.1f} s wall on {args.threads} CPU threads, "
          f"{cpu:.1f} CPU-seconds (load average now {os.getloadavg()[0]:.1f})")
    print(f"peak RSS {peak:.0f} MB (inputs before the timed part: {base:.0f} MB)")
    print(tab[["far", "text", "far_reached"]].to_string(index=False))
    # the naive loop: one Python dot product per pair, on a sample
    f = pooled.features
    pos = pd.Index(pooled.template_ids)
    a = pos.get_indexer(pairs["template_a"].to_numpy()[:args.naive_sample])
    b = pos.get_indexer(pairs["template_b"].to_numpy()[:args.naive_sample])
    t4 = time.perf_counter()
    naive = [float(np.dot(f[i], f[j])) for i, j in zip(a, b, strict=True)]
    per_pair = (time.perf_counter() - t4) / len(naive)
    assert np.allclose(naive, scores[:len(naive)], atol=1e-9 if args.precision == "float64" else 1e-5)
    print(f"naive per-pair loop: {per_pair * 1e6:.2f} us/pair on {len(naive):,} pairs -> "
          f"{per_pair * len(pairs):.0f} s for all pairs (scoring alone: "
          f"{per_pair * len(pairs) / (t2 - t1):.0f}x slower than the streamed scoring)")
    print(f"goal < 60 s and < 4096 MB: {'met' if total < 60 and peak < 4096 else 'NOT met'}")


if __name__ == "__main__":
    main()
