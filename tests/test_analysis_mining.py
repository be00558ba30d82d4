"""C11 mining: band, labels, duplicates, folds, reuse cap, determinism, shortfall."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from facecast.analysis.mining import MiningConfig, MiningShortfall, mine_pairs
from facecast.analysis.simulate import synthetic_embeddings
from facecast.analysis.stage import benchmark_mining_config, mine_benchmark
from facecast.datasets.lfw import read_lfw_pairs
from facecast.evaluate.protocols import read_cast_lists
from facecast.io.parquet_io import write_parquet


@pytest.fixture(scope="module")
def pool():
    emb, ident = synthetic_embeddings(600, 8, dim=64, seed=3)
    k = np.tile(np.arange(8), 600)
    ids = np.array([f"p{i:04d}/{j}.jpg" for i, j in zip(ident, k, strict=True)])
    return emb, np.array([f"p{i:04d}" for i in ident]), ids


def _check(pairs: pd.DataFrame, emb, ids, lo, hi):
    index = pd.Index(ids)
    a, b = index.get_indexer(pairs.image_a), index.get_indexer(pairs.image_b)
    score = (emb[a] * emb[b]).sum(1)
    np.testing.assert_allclose(pairs.ref_score, score, atol=1e-5)
    assert ((pairs.ref_score >= lo) & (pairs.ref_score <= hi)).all()
    assert ((pairs.identity_a == pairs.identity_b) == (pairs.label == 1)).all()
    assert (pairs.image_a != pairs.image_b).all()
    key = [tuple(sorted(p)) for p in zip(pairs.image_a, pairs.image_b, strict=True)]
    assert len(set(key)) == len(key)


def test_pairs_in_band_labelled_unique_and_folded(pool):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.15, 0.30), n_folds=10, n_genuine=20, n_impostor=20)
    res = mine_pairs(emb, ident, ids, cfg, seed=[1, 2])
    p = res.pairs
    _check(p, emb, ids, 0.15, 0.30)
    counts = p.groupby(["fold", "label"]).size()
    assert set(p.fold) == {*map(str, range(10)), "val"}
    assert (counts == 20).all() and len(counts) == 22
    # within each fold genuine pairs come first; folds in order 0..9, val
    assert p.fold.tolist() == sorted(p.fold.tolist(), key=lambda f: (f == "val", len(f), f))
    for _, g in p.groupby("fold"):
        assert g.label.is_monotonic_decreasing
    rep = res.report
    assert not rep["shortfall"] and rep["genuine"]["selected"] == 220
    assert 0 < rep["impostor"]["acceptance_rate"] < 1
    assert rep["max_uses_observed"] <= 7


@pytest.mark.parametrize("cap", [1, 2])
def test_reuse_cap_is_honoured(pool, cap):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.0, 0.6), n_folds=4, n_genuine=30, n_impostor=30,
                       val_fold=False, max_image_uses=cap)
    p = mine_pairs(emb, ident, ids, cfg, seed=5).pairs
    uses = pd.concat([p.image_a, p.image_b]).value_counts()
    assert uses.max() <= cap
    assert len(p) == 240


def test_same_seed_gives_a_byte_identical_file_and_another_seed_differs(pool, tmp_path):
    emb, ident, ids = pool
    shard = pa.table({"image_id": ids, "status": ["ok"] * len(ids),
                      "embedding": pa.FixedSizeListArray.from_arrays(
                          pa.array(emb.reshape(-1), pa.float32()), emb.shape[1])})
    # one image without an embedding: counted, not mined
    shard = shard.set_column(2, "embedding", pa.array(
        [None] + shard.column("embedding").to_pylist()[1:], pa.list_(pa.float32(), 64)))
    write_parquet(shard, tmp_path / "emb.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "identity": ident}), tmp_path / "subset.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "path": ids, "identity": ident}),
                  tmp_path / "manifest.parquet")
    cfg = benchmark_mining_config({"band": [0.15, 0.3], "n_genuine": 8, "n_impostor": 8,
                                   "reference_model": "m"}, {"mining": {"max_image_uses": 3}})
    assert cfg.max_image_uses == 3 and cfg.extra["reference_model"] == "m"
    digests = []
    for run, seed in (("a", 7), ("b", 7), ("c", 8)):
        out = tmp_path / run
        rep = mine_benchmark(tmp_path / "subset.parquet", [tmp_path / "emb.parquet"],
                             tmp_path / "manifest.parquet", out, bench="x", cfg=cfg, seed=seed)
        digests.append(hashlib.sha256((out / "pairs.parquet").read_bytes()).hexdigest())
    assert digests[0] == digests[1] != digests[2]
    assert rep["n_without_embedding"] == 1
    assert json.loads((tmp_path / "a/mining_report.json").read_text())["benchmark"] == "x"
    # CAST lists: 11 files, genuine first, paths from the manifest
    lists = read_cast_lists(tmp_path / "a")
    assert sorted(set(lists.fold)) == sorted([*map(str, range(10)), "val"])
    for f, g in lists.groupby("fold"):
        # test folds: genuine first; val: CAST's ten blocks (8 + 8 -> 1 + 1 in 8 blocks)
        assert g.label.tolist() == ([1, 0] * 8 if f == "val" else [1] * 8 + [0] * 8)
    # pairs.txt: LFW layout, 10 folds x 8 per class; numbers are positions in the identity
    lfw_lines = (tmp_path / "a/pairs.txt").read_text().splitlines()
    assert lfw_lines[0] == "10\t8" and len(lfw_lines) == 1 + 10 * 16
    first = lfw_lines[1].split("\t")
    pairs = pd.read_parquet(tmp_path / "a/pairs.parquet")
    g0 = pairs.iloc[0]
    assert first == [g0.identity_a, str(int(g0.image_a.split("/")[1][0]) + 1),
                     str(int(g0.image_b.split("/")[1][0]) + 1)]


def test_shortfall_fails_with_a_report_or_writes_what_was_achieved(pool):
    emb, ident, ids = pool
    small = slice(0, 80)  # 10 identities
    cfg = MiningConfig(band=(0.15, 0.30), n_folds=10, n_genuine=50, n_impostor=50)
    with pytest.raises(MiningShortfall, match="genuine: .*/550") as exc:
        mine_pairs(emb[small], ident[small], ids[small], cfg, seed=1)
    rep = exc.value.report
    assert rep["shortfall"] and rep["impostor"]["all_candidates_seen"]
    assert rep["genuine"]["candidates"] == 10 * 28
    cfg.on_shortfall = "write"
    res = mine_pairs(emb[small], ident[small], ids[small], cfg, seed=1)
    assert res.report["shortfall"]
    assert len(res.pairs) == rep["genuine"]["selected"] + rep["impostor"]["selected"]
    g = res.pairs[res.pairs.label == 1].groupby("fold").size()
    assert g.max() - g.min() <= 1  # spread evenly over the folds
    _check(res.pairs, emb, ids, 0.15, 0.30)


def test_small_pools_reuse_images_up_to_the_cap(pool):
    emb, ident, ids = pool
    rows = slice(0, 40)  # 5 identities x 8 images: 800 impostor pairs, one block
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=0, n_impostor=35,
                       val_fold=False, max_image_uses=4)
    res = mine_pairs(emb[rows], ident[rows], ids[rows], cfg, seed=2)
    assert len(res.pairs) == 70 and res.report["impostor"]["second_pass"]  # pass 1: <= 20
    uses = pd.concat([res.pairs.image_a, res.pairs.image_b]).value_counts()
    assert uses.max() <= 4


@pytest.mark.parametrize("rows", [slice(0, 0), slice(0, 8)])  # empty; one identity
def test_degenerate_subsets_report_a_shortfall(pool, rows):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.5, 1.0), band_mode="impostor_quantile", n_folds=2,
                       n_genuine=2, n_impostor=2, val_fold=False)
    with pytest.raises(MiningShortfall, match="no impostor pairs"):
        mine_pairs(emb[rows], ident[rows], ids[rows], cfg, seed=1)
    cfg.on_shortfall = "write"
    res = mine_pairs(emb[rows], ident[rows], ids[rows], cfg, seed=1)
    assert res.report["shortfall"] and res.report["band"] == [None, None]
    assert len(res.pairs) == 0 and list(res.pairs.columns)[:2] == ["image_a", "image_b"]


def test_candidate_budget_stops_mining(pool):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.15, 0.30), n_folds=2, n_genuine=0, n_impostor=5000,
                       val_fold=False, max_candidates=10_000, on_shortfall="write")
    res = mine_pairs(emb, ident, ids, cfg, seed=1)
    assert res.report["impostor"]["candidate_budget_hit"]
    assert res.report["impostor"]["candidates_scored"] < 10_000 + 4096 ** 2


def test_quantile_bands(pool):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.9, 1.0), band_mode="impostor_quantile", n_folds=2,
                       n_genuine=10, n_impostor=10, val_fold=False)
    res = mine_pairs(emb, ident, ids, cfg, seed=4)
    lo, hi = res.report["band"]
    _check(res.pairs, emb, ids, lo, hi)
    imp = res.pairs[res.pairs.label == 0].ref_score
    assert lo > 0.05 and (imp >= lo).all()
    cfg = MiningConfig(band=(0.0, 0.1), band_mode="genuine_quantile", n_folds=2,
                       n_genuine=10, n_impostor=10, val_fold=False)
    res = mine_pairs(emb, ident, ids, cfg, seed=4)
    lo, hi = res.report["band"]
    _check(res.pairs, emb, ids, lo, hi)
    assert hi < 0.5
    with pytest.raises(ValueError, match="fractions"):
        MiningConfig.from_config({"band": [0.1, 2.0], "band_mode": "genuine_quantile"})
    with pytest.raises(ValueError, match="cannot be set per benchmark"):
        benchmark_mining_config({}, {"mining": {"n_folds": 3}})


def test_lfw_pairs_export_reads_back_with_lfw_names(tmp_path):
    from facecast.analysis.exports import image_numbers, write_lfw_pairs

    manifest = pd.DataFrame({"image_id": ["A/A_0001.jpg", "A/A_0003.jpg", "B/B_0002.jpg"],
                             "path": ["A/A_0001.jpg", "A/A_0003.jpg", "B/B_0002.jpg"],
                             "identity": ["A", "A", "B"]})
    pairs = pd.DataFrame({"image_a": ["A/A_0001.jpg", "A/A_0003.jpg"],
                          "image_b": ["A/A_0003.jpg", "B/B_0002.jpg"],
                          "identity_a": ["A", "A"], "identity_b": ["A", "B"],
                          "label": [1, 0], "fold": ["0", "0"]})
    write_lfw_pairs(pairs, image_numbers(manifest), tmp_path / "pairs.txt", ["0"])
    back = read_lfw_pairs(tmp_path / "pairs.txt")
    assert back[["image_a", "image_b", "label"]].values.tolist() == \
        pairs[["image_a", "image_b", "label"]].values.tolist()


def test_genuine_sampling_visits_only_the_identities_it_needs(pool):
    emb, ident, ids = pool          # 600 identities x 8 images: 16,800 within-identity pairs
    base = dict(band=(0.0, 1.0), n_folds=2, n_genuine=20, n_impostor=0, val_fold=False,
                genuine_chunk_rows=256)
    lazy = mine_pairs(emb, ident, ids, MiningConfig(**base, genuine_oversample=2), seed=3)
    full = mine_pairs(emb, ident, ids, MiningConfig(**base, genuine_oversample=0), seed=3)
    g_lazy, g_full = lazy.report["genuine"], full.report["genuine"]
    assert g_full["identities_visited"] == 600 and g_full["candidates"] == 600 * 28
    # 2 x 40 needed pairs: one chunk of 32 identities (896 pairs) is plenty
    assert g_lazy["identities_visited"] == 32 and g_lazy["candidates"] == 32 * 28
    for res in (lazy, full):
        assert (res.pairs.label == 1).sum() == 40
        _check(res.pairs, emb, ids, 0.0, 1.0)
    # the picks still spread over many identities (not 40 pairs of a few people)
    assert lazy.pairs.identity_a.nunique() >= 20


def test_impostor_blocks_visit_every_slice_pair_once():
    from facecast.analysis.mining_search import impostor_blocks

    for n in (1, 2, 5, 64):
        blocks = list(impostor_blocks(n, np.random.default_rng(n)))
        assert len(blocks) == len(set(blocks)) == n * (n + 1) // 2
        assert all(0 <= i <= j < n for i, j in blocks)
        assert blocks != sorted(blocks) or n == 1


def test_impostor_picks_spread_over_the_pool_like_uniform_sampling(pool):
    emb, ident, ids = pool
    cfg = MiningConfig(band=(0.15, 0.30), n_folds=2, n_genuine=0, n_impostor=100,
                       val_fold=False)
    p = mine_pairs(emb, ident, ids, cfg, seed=9).pairs
    _check(p, emb, ids, 0.15, 0.30)
    images = pd.concat([p.image_a, p.image_b])
    assert images.nunique() >= 0.9 * len(images)      # almost every image used once


def test_band_edges_are_decided_on_exact_scores():
    import torch

    from facecast.analysis.mining_scores import EDGE, exact_scores, settle_band

    emb = torch.zeros(4, 3, dtype=torch.float64)
    emb[:, 0] = 1.0
    lo, hi = 0.15, 0.30
    # rows 1 and 2 at cosines a hair outside and inside the lower edge with row 0
    for row, cos in ((1, lo - 2e-8), (2, lo + 2e-8), (3, 0.2)):
        emb[row, 0] = cos
        emb[row, 1] = (1 - cos ** 2) ** 0.5
    a, b = np.array([0, 0, 0]), np.array([1, 2, 3])
    exact = exact_scores(emb, a, b)
    # float32 products that rounded the wrong way (as another device might)
    rounded = np.array([lo + EDGE / 2, lo - EDGE / 2, 0.2], np.float32)
    keep = settle_band(emb, a, b, rounded, lo, hi)
    assert exact[0] < lo <= exact[1]
    assert keep.tolist() == [False, True, True]


@pytest.mark.parametrize("dim", [1, 3, 512, 5782])
def test_exact_scores_in_small_reused_buffers_equal_whole_float64_products(dim, monkeypatch):
    """Chunks as wide as a 4 MiB float64 buffer allows (5,782-D raw LBP: 90 rows), the two
    buffers reused: the scores are bit for bit the float64 row products, whatever the
    chunk, and no buffer grows past its budget."""
    import torch

    import facecast.analysis.mining_scores as ms

    rng = np.random.default_rng(dim)
    emb = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(300, dim)),
                                                        dtype=torch.float32), dim=1)
    a, b = rng.integers(0, 300, 1000), rng.integers(0, 300, 1000)
    whole = (emb[torch.as_tensor(a)].double() * emb[torch.as_tensor(b)].double()).sum(1).numpy()
    made = []
    real_empty = torch.empty

    def spy_empty(shape, **kw):
        made.append((tuple(shape), kw.get("dtype")))
        return real_empty(shape, **kw)

    monkeypatch.setattr(ms.torch, "empty", spy_empty)
    for chunk in (8192, 7, 1):
        made.clear()
        got = ms.exact_scores(emb, a, b, chunk=chunk)
        assert got.dtype == np.float64 and np.array_equal(got, whole)
        rows = min(chunk, ms.EXACT_BUFFER_BYTES // (8 * dim), len(a))
        assert [s for s, dtype in made if dtype == torch.float64] == [(rows, dim)] * 2
    assert ms.exact_scores(emb, a[:0], b[:0]).shape == (0,)


def test_large_subsets_are_sampled_by_whole_identities(pool, tmp_path):
    from facecast.analysis.mining import pool_sample

    emb, ident, ids = pool                                  # 600 identities x 8 images
    keep = pool_sample(ident, 100, np.random.default_rng(0))
    kept = pd.Series(ident[keep]).value_counts()
    assert 100 <= keep.sum() < 108 and (kept == 8).all()     # whole identities, ~100 images
    assert pool_sample(ident, 0, np.random.default_rng(0)).all()
    assert pool_sample(ident, 4800, np.random.default_rng(0)).all()
    # the stage reads only the sampled identities' embeddings and says so
    write_parquet(pa.table({"image_id": ids, "status": ["ok"] * len(ids),
                            "embedding": pa.FixedSizeListArray.from_arrays(
                                pa.array(emb.reshape(-1), pa.float32()), emb.shape[1])}),
                  tmp_path / "emb.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "identity": ident}), tmp_path / "subset.parquet")
    write_parquet(pd.DataFrame({"image_id": ids, "path": ids, "identity": ident}),
                  tmp_path / "manifest.parquet")
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=10, n_impostor=10,
                       val_fold=False, max_pool_images=400)
    rep = mine_benchmark(tmp_path / "subset.parquet", [tmp_path / "emb.parquet"],
                         tmp_path / "manifest.parquet", tmp_path / "out", bench="b", cfg=cfg,
                         seed=1)
    assert 400 <= rep["n_pool_sampled"] < 408 and rep["pool"]["n_images"] == rep["n_pool_sampled"]
    pairs = pd.read_parquet(tmp_path / "out/pairs.parquet")
    assert len(pairs) == 40
    lines = (tmp_path / "out/0.list").read_text().splitlines()
    assert len(lines) == 20 and lines[0].split()[0] in set(ids)
