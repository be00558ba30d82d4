"""One rule per metric, in every stage (issue 30.3): the same scored pairs give the same
10-fold accuracy, TAR@FAR and threshold in evaluate, compare, slices and fairness."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from facecast.compare.paired import align, compare_pair
from facecast.evaluate.folds import EVAL_FOLD, evaluation_folds, scored_folds
from facecast.evaluate.metrics import (
    allowed_impostors,
    far_resolvable,
    min_impostors,
    roc_points,
    tar_at_far,
)
from facecast.evaluate.stage import evaluate_benchmark
from facecast.fairness.threshold import group_rates, thresholds_at_fmr
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.slices.discover import global_threshold, slice_accuracy

FAR = 0.01


def _embeddings(path, ids, ident, noise, seed, fail=()):
    """One embedding shard: identities clustered, ``noise`` apart; ``fail`` rows failed."""
    rng = np.random.default_rng(seed)
    names = sorted(set(ident))
    centres = {n: rng.standard_normal(16) for n in names}
    emb = np.array([centres[i] + noise * rng.standard_normal(16) for i in ident], np.float32)
    emb = np.round(emb / np.linalg.norm(emb, axis=1, keepdims=True), 2)  # ties in scores
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    status = ["failed" if k in fail else "ok" for k in range(len(ids))]
    write_parquet(pa.table({
        "image_id": ids, "status": status, "message": [""] * len(ids),
        "embedding": pa.array([None if k in fail else list(map(float, e))
                               for k, e in enumerate(emb)], pa.list_(pa.float32(), 16)),
        "norm": pa.array(np.ones(len(ids)), pa.float32())}), path)


def _protocol(path, ids, ident, folds: str, seed=1):
    """Genuine and impostor pairs; ``folds`` 'ten' (the protocol's own 10 folds) or 'one'
    (one test fold + a val fold: the stage stratifies)."""
    rng = np.random.default_rng(seed)
    by_id = pd.Series(ids).groupby(np.asarray(ident)).apply(list).to_dict()
    names = sorted(by_id)
    rows = []
    for _ in range(400):
        who = names[rng.integers(len(names))]
        a, b = rng.choice(len(by_id[who]), 2, replace=False)
        rows.append((by_id[who][a], by_id[who][b], 1, who))
    for _ in range(1200):
        x, y = rng.choice(len(names), 2, replace=False)
        rows.append((by_id[names[x]][rng.integers(6)], by_id[names[y]][rng.integers(6)], 0,
                     names[x]))
    p = pd.DataFrame(rows, columns=["image_a", "image_b", "label", "identity_a"])
    p["identity_b"] = p["image_b"].str.split("/").str[0]
    if folds == "ten":
        p["fold"] = (np.arange(len(p)) % 10).astype(str)
    else:
        p["fold"] = np.where(rng.random(len(p)) < 0.1, "val", "0")
    write_parquet(p, path)


@pytest.fixture(scope="module", params=["ten", "one"])
def scored(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"one_rule_{request.param}")
    ident = [f"p{i:02d}" for i in range(40) for _ in range(6)]
    ids = [f"{n}/{k % 6}.jpg" for k, n in enumerate(ident)]
    _embeddings(root / "a.parquet", ids, ident, 0.9, seed=0)
    _embeddings(root / "b.parquet", ids, ident, 1.1, seed=0)
    _protocol(root / "proto.parquet", ids, ident, request.param)
    rows = {}
    for m in ("a", "b"):
        rows[m] = evaluate_benchmark(root / "proto.parquet", [root / f"{m}.parquet"],
                                     root / f"eval/{m}.parquet", root / f"eval/{m}",
                                     model=m, benchmark="p",
                                     cfg={"fars": [FAR], "seed": 5})
    return root, rows


def test_evaluate_writes_the_folds_it_used(scored):
    root, rows = scored
    s = read_parquet(root / "eval/a.parquet")
    assert EVAL_FOLD in s.columns
    test = s[EVAL_FOLD] != ""
    assert (s.loc[~test, "fold"] == "val").all()
    assert rows["a"]["n_folds"] == 10 == s.loc[test, EVAL_FOLD].nunique()
    # the file's folds are the rule's folds
    again, _ = evaluation_folds(s.drop(columns=[EVAL_FOLD]), n_folds=10, seed=5)
    np.testing.assert_array_equal(again, s[EVAL_FOLD].to_numpy())


def test_accuracy_tar_and_threshold_agree_in_every_stage(scored):
    root, rows = scored
    a = read_parquet(root / "eval/a.parquet")
    b = read_parquet(root / "eval/b.parquet")
    ev = rows["a"]
    key = "1e-2"
    # compare: the same accuracy and TAR@FAR for model A
    paired = align(a, b, {"seed": 5})
    table, _ = compare_pair(paired, fars=[FAR], fmr=FAR, n_boot=20, seed=0)
    by = table.set_index("metric")
    assert by.loc["accuracy", "value_a"] == pytest.approx(ev["accuracy"], abs=1e-12)
    assert by.loc[f"tar@far={FAR:g}", "value_a"] == pytest.approx(ev[f"tar@far={key}"])
    assert by.loc["accuracy", "value_b"] == pytest.approx(rows["b"]["accuracy"], abs=1e-12)
    # slices: the whole protocol as one slice has evaluate's accuracy
    test = a[a[EVAL_FOLD] != ""].reset_index(drop=True)
    folds = scored_folds(test)
    acc, sd, why = slice_accuracy(test, np.ones(len(test), bool), folds)
    assert why == "" and acc == pytest.approx(ev["accuracy"], abs=1e-12)
    assert sd == pytest.approx(ev["accuracy_std"], abs=1e-12)
    # slices' and fairness's threshold at the FMR make evaluate's decisions
    s, y = test["score"].to_numpy(), test["label"].to_numpy()
    thr_slices = global_threshold(s, y, {"threshold": {"value": FAR}})["threshold"]
    thr_fair = thresholds_at_fmr(s[y == 0], [FAR])[0]
    assert thr_slices == thr_fair
    r = group_rates(s, y, np.array(["all"] * len(s), dtype=object), [thr_fair]).iloc[0]
    assert 1 - r["fnmr"] == pytest.approx(ev[f"tar@far={key}"])
    assert r["fmr"] == pytest.approx(ev[f"far_reached@far={key}"])
    t_eval = ev[f"threshold@far={key}"]
    assert ((s >= t_eval) == (s >= thr_fair)).all()


def test_failures_do_not_move_a_pair_to_another_fold(tmp_path):
    """Two models with different failures: each pair keeps its fold in both files, so a
    comparison on the common pairs uses one fold per pair."""
    ident = [f"p{i:02d}" for i in range(40) for _ in range(6)]
    ids = [f"{n}/{k % 6}.jpg" for k, n in enumerate(ident)]
    _embeddings(tmp_path / "a.parquet", ids, ident, 0.9, seed=0)
    _embeddings(tmp_path / "b.parquet", ids, ident, 0.9, seed=0, fail={3, 50, 51, 120})
    _protocol(tmp_path / "proto.parquet", ids, ident, "one")
    for m in ("a", "b"):
        evaluate_benchmark(tmp_path / "proto.parquet", [tmp_path / f"{m}.parquet"],
                           tmp_path / f"{m}.out.parquet", tmp_path / m, model=m,
                           benchmark="p", cfg={"fars": [FAR], "seed": 5})
    fa = read_parquet(tmp_path / "a.out.parquet")
    fb = read_parquet(tmp_path / "b.out.parquet")
    assert (fb["status"] != "ok").any()
    np.testing.assert_array_equal(fa[EVAL_FOLD].to_numpy(), fb[EVAL_FOLD].to_numpy())


def test_one_resolvability_rule_and_one_impostor_allowance():
    assert min_impostors(1e-3) == 1000 and min_impostors(1e-6) == 1_000_000
    assert far_resolvable(1000, 1e-3) and not far_resolvable(999, 1e-3)
    assert far_resolvable(5, float("nan"))
    np.testing.assert_array_equal(far_resolvable(np.array([9, 10, 11]), 0.1),
                                  [False, True, True])
    # unit weights and their running sum give the same count: floor(target * n)
    for n in (1, 7, 10, 1000, 12345):
        for t in (1e-4, 1e-3, 0.01, 0.1, 0.3, 1 / 7, 0.5, 1.0):
            closed = allowed_impostors(n, t)[0]
            assert closed == min(n, int(np.floor(t * n + 1e-9)))
            assert allowed_impostors(np.arange(1, n + 1), t)[0] == closed
    # a target of exactly k / n allows k (0.1 * 30 is 3.0000000000000004)
    assert allowed_impostors(30, 0.1)[0] == 3
    # TAR@FAR and the threshold at FMR use that count on tied scores
    rng = np.random.default_rng(2)
    s = np.round(rng.normal(size=3000), 1)
    y = (rng.random(3000) < 0.3).astype(int)
    s[y == 1] += 1
    far, tar, thr = roc_points(s, y)
    n_imp = int((y == 0).sum())
    for t in (0.001, 0.01, 0.05, 0.2):
        r = tar_at_far(far, tar, thr, t, n_imp)
        k = allowed_impostors(n_imp, t)[0]
        assert r["n_false_accepts"] <= k
        th = thresholds_at_fmr(s[y == 0], [t])[0]
        assert (s[y == 0] >= th).sum() <= k
        assert r["tar"] == pytest.approx((s[y == 1] >= th).mean())
