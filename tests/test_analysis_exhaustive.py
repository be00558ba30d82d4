"""The exhaustive protocol (mining.mode: all): every genuine pair, impostors all or sampled."""

from __future__ import annotations

import hashlib
import json
import logging
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from facecast.analysis.exhaustive import _pair_from_index, impostor_pairs, stratified_folds
from facecast.analysis.mining import MiningConfig, mine_pairs
from facecast.analysis.simulate import synthetic_embeddings
from facecast.analysis.stage import benchmark_mining_config, mine_benchmark
from facecast.io.parquet_io import read_provenance, write_parquet


@pytest.fixture(scope="module")
def small():
    emb, ident = synthetic_embeddings(30, 5, dim=64, seed=4)         # 150 images
    ids = np.array([f"i{k:04d}" for k in range(len(ident))])
    return emb, np.array([f"p{i:03d}" for i in ident]), ids


def _keys(p: pd.DataFrame) -> set[tuple[str, str]]:
    return {tuple(sorted(x)) for x in zip(p.image_a, p.image_b, strict=True)}


def test_pair_index_inverts_the_triangular_numbering():
    k = np.arange(5050)
    i, j = _pair_from_index(k)
    assert ((i >= 0) & (i < j) & (j <= 100)).all()
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == sorted(
        combinations(range(101), 2), key=lambda t: (t[1], t[0]))
    big = np.array([0, 10**11, 5 * 10**11 - 1], np.int64)           # 1M-image pools
    bi, bj = _pair_from_index(big)
    np.testing.assert_array_equal(bj * (bj - 1) // 2 + bi, big)
    assert (bi < bj).all()


def test_mode_all_takes_every_pair_when_the_pool_is_small(small):
    emb, ident, ids = small
    cfg = MiningConfig(mode="all", n_impostor=0, n_folds=10)
    res = mine_pairs(emb, ident, ids, cfg, seed=[1, 2])
    p, rep = res.pairs, res.report
    n = len(ids)
    assert (p.label == 1).sum() == 30 * 10 and (p.label == 0).sum() == n * (n - 1) // 2 - 300
    assert len(_keys(p)) == len(p)                                   # no pair twice
    assert ((p.identity_a == p.identity_b) == (p.label == 1)).all()
    a = pd.Index(ids).get_indexer(p.image_a)
    b = pd.Index(ids).get_indexer(p.image_b)
    np.testing.assert_allclose(p.ref_score, (emb[a] * emb[b]).sum(1), atol=1e-6)
    assert not rep["shortfall"] and not rep["impostor"]["sampled"]
    assert rep["impostor"]["available"] == rep["impostor"]["selected"]
    # asking for more impostors than exist is not a shortfall either
    more = mine_pairs(emb, ident, ids, MiningConfig(mode="all", n_impostor=10**7), seed=1)
    assert not more.report["shortfall"] and len(more.pairs) == len(p)


def test_mode_all_samples_n_impostor_in_total_and_is_deterministic(small):
    emb, ident, ids = small
    cfg = MiningConfig(mode="all", n_impostor=2000, n_folds=10, band=(0.9, 1.0))
    r1 = mine_pairs(emb, ident, ids, cfg, seed=[5, 6])
    r2 = mine_pairs(emb, ident, ids, cfg, seed=[5, 6])
    r3 = mine_pairs(emb, ident, ids, cfg, seed=[5, 7])
    pd.testing.assert_frame_equal(r1.pairs, r2.pairs)
    assert _keys(r1.pairs) != _keys(r3.pairs)
    p = r1.pairs
    # the band does not apply: all 300 genuine pairs, 2000 impostors over the whole range
    assert (p.label == 1).sum() == 300 and (p.label == 0).sum() == 2000
    assert p.ref_score.min() < 0.5
    assert r1.report["impostor"]["sampled"] and not r1.report["shortfall"]
    assert len(_keys(p)) == len(p)
    # most of the impostors wanted (8000 of 10,875): sampled from the enumerated pairs
    most = mine_pairs(emb, ident, ids, MiningConfig(mode="all", n_impostor=8000), seed=2).pairs
    assert (most.label == 0).sum() == 8000 and len(_keys(most)) == len(most)
    assert ((most.identity_a == most.identity_b) == (most.label == 1)).all()


def test_rejection_sampling_is_uniform_and_distinct():
    codes = np.repeat(np.arange(400), 3)                             # 1200 images
    a, b, avail = impostor_pairs(codes, 5000, 400 * 3, np.random.default_rng(0))
    assert len(a) == 5000 and avail == 1200 * 1199 // 2 - 1200
    assert (codes[a] != codes[b]).all() and (a < b).all()
    assert len(set(zip(a.tolist(), b.tolist(), strict=True))) == 5000
    uses = np.bincount(np.r_[a, b], minlength=1200)
    assert uses.max() < 25 and (uses > 0).mean() > 0.99              # spread over the pool


def test_folds_are_stratified_and_genuine_pairs_grouped_by_identity(small):
    emb, ident, ids = small
    res = mine_pairs(emb, ident, ids, MiningConfig(mode="all", n_impostor=2200), seed=3)
    p = res.pairs
    counts = p.groupby(["fold", "label"]).size().unstack()
    assert set(counts.index) == {*map(str, range(10)), "val"}
    # 30 identities x 10 pairs dealt to 11 folds; 2200 impostors round-robin
    assert counts[1].min() >= 20 and counts[1].max() <= 30
    assert (counts[0] == 200).all()
    gen = p[p.label == 1]
    assert (gen.groupby("identity_a").fold.nunique() == 1).all()     # an identity in one fold
    for _, g in p.groupby("fold", sort=False):                       # genuine first per fold
        assert g.label.is_monotonic_decreasing
    assert "identity" in res.report["folds_formed"]
    # fewer groups than folds: dealt pair by pair, still balanced
    f = stratified_folds(7, np.array([0, 0, 0, 0, 0, 1, 1]), ["0", "1", "2"],
                         np.random.default_rng(0))
    assert sorted(pd.Series(f).value_counts().tolist()) == [2, 2, 3]


def test_per_benchmark_mode_all_through_the_stage_without_shortfall_words(small, tmp_path,
                                                                           caplog):
    emb, ident, ids = small
    write_parquet(pa.table({"image_id": ids, "status": ["ok"] * len(ids),
                            "embedding": pa.FixedSizeListArray.from_arrays(
                                pa.array(emb.reshape(-1), pa.float32()), emb.shape[1])}),
                  tmp_path / "emb.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "identity": ident}), tmp_path / "subset.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "path": ids, "identity": ident}),
                  tmp_path / "manifest.parquet")
    cfg = benchmark_mining_config({"n_genuine": 500, "n_impostor": 500, "on_shortfall": "fail"},
                                  {"mining": {"mode": "all", "n_impostor": 3000}})
    digests = []
    for run in ("a", "b"):
        with caplog.at_level(logging.INFO):
            rep = mine_benchmark(tmp_path / "subset.parquet", [tmp_path / "emb.parquet"],
                                 tmp_path / "manifest.parquet", tmp_path / run, bench="fair",
                                 cfg=cfg, seed=11)
        digests.append(hashlib.sha256((tmp_path / run / "pairs.parquet").read_bytes()).digest())
    assert digests[0] == digests[1]
    assert rep["shortfall"] is False and rep["mode"] == "all"
    assert "SHORTFALL" not in caplog.text.upper() and "all 300 genuine pairs" in caplog.text
    prov = read_provenance(tmp_path / "a/pairs.parquet")
    assert prov["mode"] == "all" and "grouped by identity" in prov["folds"]
    saved = json.loads((tmp_path / "a/mining_report.json").read_text())
    assert saved["impostor"]["selected"] == 3000 and saved["genuine"]["selected"] == 300
    assert len((tmp_path / "a/val.list").read_text().splitlines()) == \
        sum(v["genuine"] + v["impostor"] for k, v in saved["fold_counts"].items() if k == "val")


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="band | all"):
        MiningConfig.from_config({"mode": "every"})
