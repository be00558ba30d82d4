"""1:N identification: a 3-identity CMC worked by hand, FNIR/FPIR, blocked search."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.identification.metrics import cmc, det_curve, fnir, fnir_at_fpir, fpir
from facecast.identification.protocol import build_protocol
from facecast.identification.search import search


def _unit(deg):
    r = np.deg2rad(np.asarray(deg, dtype=np.float64))
    return np.stack([np.cos(r), np.sin(r)], axis=1).astype(np.float32)


def test_three_identity_cmc_by_hand():
    gallery = _unit([0, 90, 180])             # identities 0, 1, 2
    probes = _unit([10, 170, 280, 45])        # mates 0, 1, 2; the last is non-mated
    mate = np.array([0, 1, 2, -1])
    res = search(probes, gallery, mate, k=3, probe_block=2, gallery_block=2, device="cpu")
    # probe at 10 deg: own identity first; at 170 deg: 180 (cos 10) beats 90 (cos 80);
    # at 280 deg: 0 (cos 80) beats 180 (cos 100)
    assert res.mate_rank.tolist() == [1, 2, 2, 0]
    np.testing.assert_allclose(res.mate_score[:3], np.cos(np.deg2rad([10, 80, 100])),
                               atol=1e-6)
    assert res.top_index[3, 0] == 0 and res.top_score[3, 0] == pytest.approx(np.cos(np.pi / 4))
    np.testing.assert_allclose(cmc(res.mate_rank, [1, 2, 3]), [1 / 3, 1, 1])
    # FNIR(N, 1, T=0.5): only the first probe is a rank-1 hit above T
    assert fnir(res.mate_rank, res.mate_score, 1, 0.5) == pytest.approx(2 / 3)
    assert fnir(res.mate_rank, res.mate_score, 2, 0.1) == pytest.approx(1 / 3)
    assert fpir(res.top_score[3:, 0], 0.5) == 1.0
    assert fpir(res.top_score[3:, 0], 0.8) == 0.0
    t = fnir_at_fpir(res.mate_rank, res.mate_score, res.top_score[3:, 0], [0.5])
    assert not t["resolvable"].iloc[0] and t["text"].iloc[0] == "n/a (1 non-mated searches)"


def test_blocked_search_equals_brute_force():
    rng = np.random.default_rng(0)
    g = rng.standard_normal((37, 8)).astype(np.float32)
    p = rng.standard_normal((23, 8)).astype(np.float32)
    mate = rng.integers(-1, 37, 23)
    res = search(p, g, mate, k=5, probe_block=4, gallery_block=6, device="cpu",
                 exact_rank=True)
    cens = search(p, g, mate, k=5, probe_block=4, gallery_block=6, device="cpu")
    np.testing.assert_array_equal(cens.mate_rank, np.minimum(res.mate_rank, 6))
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    pn = p / np.linalg.norm(p, axis=1, keepdims=True)
    full = pn @ gn.T
    np.testing.assert_allclose(res.top_score, -np.sort(-full, axis=1)[:, :5], atol=1e-5)
    for i in range(23):
        if mate[i] >= 0:
            others = np.delete(full[i], mate[i])
            assert res.mate_rank[i] == 1 + (others > full[i, mate[i]] + 1e-6).sum()
        else:
            assert res.mate_rank[i] == 0


def test_fnir_at_fpir_threshold_meets_target():
    rng = np.random.default_rng(1)
    nm = rng.random(1000)
    rank = np.ones(200, int)
    score = rng.random(200) + 0.5
    t = fnir_at_fpir(rank, score, nm, [0.01, 0.1])
    assert (t["fpir"] <= t["target_fpir"]).all() and t["resolvable"].all()
    d = det_curve(rank, score, nm)
    assert d["fpir"].is_monotonic_decreasing and d["fnir"].is_monotonic_increasing


def test_protocol_roles_are_seeded_and_complete():
    pool = pd.DataFrame({"image_id": [f"im{i:02d}" for i in range(30)],
                         "identity": [f"id{i // 3}" for i in range(30)]})
    a = build_protocol(pool, seed=5, heldout_fraction=0.2)
    b = build_protocol(pool.sample(frac=1, random_state=1), seed=5, heldout_fraction=0.2)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 30 and set(a["role"]) <= {"gallery", "mated", "nonmated", "unused"}
    per = a.groupby("identity")["role"].agg(set)
    held = per[per.apply(lambda r: "nonmated" in r)]
    assert len(held) == 2 and all(r == {"nonmated"} for r in held)
    enrolled = a[a["role"] == "gallery"]
    assert enrolled["identity"].is_unique and len(enrolled) == 8
    c = build_protocol(pool, seed=5, heldout_fraction=0.2, gallery_size=3,
                       max_probes_per_identity=1)
    assert (c["role"] == "gallery").sum() == 3 and (c["role"] == "mated").sum() == 3
    assert (c["role"] == "nonmated").sum() == 2
    assert set(c.loc[c["role"] == "unused", "reason"]) == {
        "identity beyond gallery_size", "over max_probes_per_identity"}


def test_bfloat16_search_rescored_in_float32():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((500, 32)).astype(np.float32)
    mate = rng.integers(0, 500, 60)
    p = g[mate] + 0.8 * rng.standard_normal((60, 32)).astype(np.float32)
    a = search(p, g, mate, k=5, device="cpu")
    b = search(p, g, mate, k=5, device="cpu", precision="bfloat16")
    np.testing.assert_allclose(b.top_score, a.top_score, atol=1e-5)  # float32 scores
    assert (b.top_index == a.top_index).mean() > 0.95
    assert (b.mate_rank == a.mate_rank).mean() > 0.95
    with pytest.raises(ValueError, match="precision"):
        search(p, g, mate, precision="int8")
