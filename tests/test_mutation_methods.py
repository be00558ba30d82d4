"""Issue 51: `facecast.mitigation.methods.learn_and_apply` wired right - every method learns
on the calibration side only, with its own seed (cohort ``seed + 1``, k-means
``seed + 2``), its own cluster count (FSN capped by the calibration *impostors*), the
right images' codes and groups, and the notes and KS bounds the module docstring
promises. Each figure is recomputed here from the building blocks (tested against their
references in tests/test_mitigation.py), so a mutant of
`make mutate MODULES=mitigation.methods` that feeds a part the wrong input fails here.
A small world made here, no stage run; each test calls `learn_and_apply` itself."""

from __future__ import annotations

import logging

import numpy as np

from facecast.mitigation.calibrate import beta_fit
from facecast.mitigation.clusters import (
    assign,
    both_members,
    cluster_cap,
    clustercal_fit,
    clustercal_prob,
    either_members,
    fit_kmeans,
    fsn_fit,
    fsn_scores,
)
from facecast.mitigation.cohort import (
    choose_cohort,
    cohort_self_stats,
    image_stats,
    l2_normalise,
    normalised_scores,
)
from facecast.mitigation.fusion import fusion_fit, group_shift_fit, group_shift_scores
from facecast.mitigation.methods import (
    PARTS,
    Images,
    Settings,
    Side,
    _ks_bounds,
    finish,
    learn_and_apply,
    start,
)
from facecast.mitigation.targets import METHODS

N_IMG, DIM = 40, 6


def _world(seed: int = 0):
    """40 images of 20 identities (two each), groups "a"/"b" by identity parity (image 39:
    no group); calibration pairs among images 0-29, evaluated pairs among 20-39 (images
    20-29 on both sides). The calibration side has 15 genuine and 45 impostor pairs, so
    its impostor count differs from its genuine and pair counts."""
    rng = np.random.default_rng(seed)
    ident = np.repeat(np.arange(20), 2)
    centre = rng.normal(size=(20, DIM))
    emb = l2_normalise(centre[ident] + 0.6 * rng.normal(size=(N_IMG, DIM)))
    group = np.where(ident % 2 == 0, 0, 1)
    group[39] = -1
    im = Images(np.array([f"img{i:02d}" for i in range(N_IMG)]), emb, ident, group, ["a", "b"])

    def side(lo, hi, n_imp, rs):
        imgs = np.arange(lo, hi)
        gen = [(i, i + 1) for i in imgs[::2]]
        imp = []
        while len(imp) < n_imp:
            a, b = rs.choice(imgs, 2, replace=False)
            if ident[a] != ident[b]:
                imp.append((int(a), int(b)))
        pairs = np.array(gen + imp)
        ia, ib = pairs[:, 0], pairs[:, 1]
        score = np.einsum("ij,ij->i", emb[ia], emb[ib])
        label = (ident[ia] == ident[ib]).astype(np.int64)
        other = score + 0.3 * rs.normal(size=len(score))
        return Side(ia, ib, score, label, np.column_stack([other, score]))

    cal = side(0, 30, 45, np.random.default_rng(seed + 10))
    ev = side(20, 40, 25, np.random.default_rng(seed + 11))
    return im, ev, cal


def _settings(**kw):
    args = dict(methods=METHODS, fmr=0.1, cohort_size=12, top_k=4, clusters=6, seed=7,
                fusion_models=("other", "this"))
    return Settings(**{**args, **kw})


def _cal_images(cal):
    return np.unique(np.concatenate([cal.ia, cal.ib]))


def test_cohort_methods_use_a_seed_plus_one_sample_of_the_calibration_images():
    """The cohort: ``choose_cohort(calibration images, cohort_size, seed + 1)``; its own
    statistics recorded as ``mu`` and ``sd``; each cohort method's scores on both sides
    equal ``normalised_scores`` with the stats of that cohort and ``top_k``."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "znorm", "tnorm", "ztnorm", "snorm", "asnorm"))
    res = learn_and_apply(im, ev, cal, st)
    imgs = _cal_images(cal)
    assert len(imgs) == 30
    pick = imgs[choose_cohort(30, 12, 8)]
    # another seed draws another cohort (so the seed is checked, not only the size)
    assert not np.array_equal(pick, imgs[choose_cohort(30, 12, 7)])
    assert not np.array_equal(pick, imgs[choose_cohort(30, 12, 9)])
    learned = res.learned["cohort"]
    assert list(learned) == ["images", "top_k", "mu", "sd"]
    assert learned["images"].tolist() == im.ids[pick].tolist() and learned["top_k"] == 4
    mu, sd = cohort_self_stats(im.emb[pick], im.ident[pick])
    np.testing.assert_array_equal(learned["mu"], mu)
    np.testing.assert_array_equal(learned["sd"], sd)
    assert not np.allclose(mu, sd)
    stats = image_stats(im.emb, im.ident, im.emb[pick], im.ident[pick], (mu, sd), 4)
    for m in ("znorm", "tnorm", "ztnorm", "snorm", "asnorm"):
        np.testing.assert_array_equal(res.scores[m],
                                      normalised_scores(m, ev.score, ev.ia, ev.ib, stats))
        np.testing.assert_array_equal(res.cal_scores[m],
                                      normalised_scores(m, cal.score, cal.ia, cal.ib, stats))
    assert list(res.scores) == list(st.methods)
    assert res.notes == []              # 12 of 30 images: a full cohort, no note


def test_a_cohort_of_every_calibration_image_is_noted_only_when_short():
    """cohort_size equal to the 30 calibration images: no note; 31: the note names both
    numbers; top_k above the cohort is cut to the cohort."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "znorm"), cohort_size=30, top_k=50)
    res = learn_and_apply(im, ev, cal, st)
    assert res.notes == [] and res.learned["cohort"]["top_k"] == 30
    st = _settings(methods=("raw", "znorm"), cohort_size=31, top_k=4)
    res = learn_and_apply(im, ev, cal, st)
    assert res.notes == ["cohort: 30 calibration images, not cohort_size 31 (all of them)"]
    assert len(res.learned["cohort"]["images"]) == 30


def test_fsn_clusters_are_capped_by_the_calibration_impostors():
    """45 calibration impostors, 15 genuine pairs; FSN at FMR 0.1 needs 10 impostors a
    cluster, 4 x that on average (CLUSTER_MARGIN): k = 2 * 45 // 40 = 2 (genuine pairs
    would give 0 -> 1, all pairs 3). FairCal keeps 6. Each k-means is fitted with seed + 2
    on the calibration images and assigns every image."""
    im, ev, cal = _world()
    assert int((cal.label == 0).sum()) == 45 and int((cal.label == 1).sum()) == 15
    st = _settings(methods=("raw", "fsn", "faircal"))
    res = learn_and_apply(im, ev, cal, st)
    assert cluster_cap(6, 30, 45, 0.1)[0] == 2
    assert cluster_cap(6, 30, 15, 0.1)[0] == 1 and cluster_cap(6, 30, 60, 0.1)[0] == 3
    km = res.learned["kmeans"]
    assert km["fsn"]["k"] == 2 and km["faircal"]["k"] == 6
    imgs = _cal_images(cal)
    for m, k in (("fsn", 2), ("faircal", 6)):
        centres = fit_kmeans(im.emb[imgs], k, 9)
        np.testing.assert_array_equal(km[m]["centres"], centres)
        np.testing.assert_array_equal(res.codes[m], assign(im.emb, centres))
    assert not np.array_equal(fit_kmeans(im.emb[imgs], 6, 8), km["faircal"]["centres"])
    assert res.notes == [
        "k-means (fsn): 2 clusters, not 6: 30 calibration images and 45 calibration "
        "impostor pairs (a cluster of average size gets 4 x 10 impostor pairs at FMR 0.1)"]


def test_equal_cluster_counts_share_one_k_means():
    """FSN and FairCal at the same k share the fit (FairCal's saved k-means): the same
    centres object; a cap by the images is noted for both."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "fsn", "faircal"), clusters=2)
    res = learn_and_apply(im, ev, cal, st)
    km = res.learned["kmeans"]
    assert km["fsn"]["centres"] is km["faircal"]["centres"]
    assert res.codes["fsn"] is res.codes["faircal"] and res.notes == []
    st = _settings(methods=("raw", "faircal"), clusters=31)
    res = learn_and_apply(im, ev, cal, st)
    assert res.learned["kmeans"]["faircal"]["k"] == 30
    assert res.notes[0] == "k-means (faircal): 30 clusters, not 31: 30 calibration images"


def test_fsn_and_faircal_scores_from_their_own_clusters():
    """FSN: thresholds per cluster of the calibration impostors, scores on both sides;
    FairCal: one beta map per cluster of pairs with either image in it (the global map
    fitted on all calibration pairs), a probability per evaluated pair."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "fsn", "faircal"))
    res = learn_and_apply(im, ev, cal, st)
    cf, k = res.codes["fsn"], 2
    fsn = fsn_fit(cal.score, cal.label, cf[cal.ia], cf[cal.ib], k, 0.1)
    np.testing.assert_array_equal(res.learned["fsn"].thresholds, fsn.thresholds)
    np.testing.assert_array_equal(res.scores["fsn"], fsn_scores(fsn, ev.score, cf[ev.ia],
                                                                cf[ev.ib]))
    np.testing.assert_array_equal(res.cal_scores["fsn"],
                                  fsn_scores(fsn, cal.score, cf[cal.ia], cf[cal.ib]))
    assert fsn.resolvable.all()
    cc_codes = res.codes["faircal"]
    cc = clustercal_fit(cal.score, cal.label, either_members(cc_codes[cal.ia],
                                                             cc_codes[cal.ib], 6),
                        beta_fit(cal.score, cal.label))
    np.testing.assert_array_equal(res.learned["faircal"].a, cc.a)
    want = clustercal_prob(cc, ev.score, cc_codes[ev.ia], cc_codes[ev.ib])
    np.testing.assert_array_equal(res.scores["faircal"], want)
    np.testing.assert_array_equal(res.probs["faircal"], want)
    assert "faircal" not in res.cal_scores


def test_an_fsn_cluster_short_of_impostors_is_noted():
    """FMR 0.01 needs 100 impostors a cluster: with 45, k = 1 (noted) and that cluster is
    unresolvable (noted with its count)."""
    im, ev, cal = _world()
    res = learn_and_apply(im, ev, cal, _settings(methods=("raw", "fsn"), fmr=0.01))
    assert res.learned["kmeans"]["fsn"]["k"] == 1
    assert res.notes[1] == ("fsn: 1 of 1 clusters have fewer than 1/FMR calibration "
                            "impostor pairs and keep the global threshold")
    np.testing.assert_array_equal(res.scores["fsn"], ev.score)


def test_oracle_and_group_thresholds_use_the_images_groups():
    """oracle_cal: a map per group from the pairs with both images in it; group
    thresholds: per-group impostor thresholds at the FMR, shifting one-group pairs."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "oracle_cal", "group_thresholds"))
    res = learn_and_apply(im, ev, cal, st)
    g = im.group
    cc = clustercal_fit(cal.score, cal.label, both_members(g[cal.ia], g[cal.ib], 2),
                        beta_fit(cal.score, cal.label))
    want = clustercal_prob(cc, ev.score, g[ev.ia], g[ev.ib])
    np.testing.assert_array_equal(res.scores["oracle_cal"], want)
    np.testing.assert_array_equal(res.learned["oracle_cal"].n_pairs, cc.n_pairs)
    gs = group_shift_fit(cal.score, cal.label, g[cal.ia], g[cal.ib], ["a", "b"], 0.1)
    np.testing.assert_array_equal(res.learned["group_thresholds"].thresholds, gs.thresholds)
    np.testing.assert_array_equal(res.scores["group_thresholds"],
                                  group_shift_scores(gs, ev.score, g[ev.ia], g[ev.ib]))
    np.testing.assert_array_equal(res.cal_scores["group_thresholds"],
                                  group_shift_scores(gs, cal.score, g[cal.ia], g[cal.ib]))
    assert not np.array_equal(res.scores["group_thresholds"], ev.score)


def test_unfitted_groups_and_clusters_are_noted():
    """FMR 0.01: neither group has 100 same-group impostors (noted by name); a group with
    no calibration pair of both labels keeps the global map (noted with the count)."""
    im, ev, cal = _world()
    keep = ~((im.group[cal.ia] == 1) & (im.group[cal.ib] == 1) & (cal.label == 1))
    cal1 = Side(cal.ia[keep], cal.ib[keep], cal.score[keep], cal.label[keep],
                cal.partners[keep])
    st = _settings(methods=("raw", "oracle_cal", "group_thresholds"), fmr=0.01)
    res = learn_and_apply(im, ev, cal1, st)
    assert res.notes == [
        "oracle_cal: 1 of 2 clusters (groups) lack calibration pairs of both labels and "
        "use the global map",
        "group_thresholds: groups ['a', 'b'] have fewer than 1/FMR calibration impostor "
        "pairs and keep the global threshold"]


def test_faircal_clusters_without_both_labels_are_counted_in_the_note():
    """One cluster per calibration image (30): a cluster whose pairs (either image in it)
    lack a genuine or an impostor pair keeps the global map; the note counts those, not
    the clusters with their own map."""
    im, ev, cal = _world()
    res = learn_and_apply(im, ev, cal, _settings(methods=("raw", "faircal"), clusters=30))
    cc = res.learned["faircal"]
    lacking = int((~cc.own_map).sum())
    assert len(cc.own_map) == 30 and lacking != 30 - lacking
    assert res.notes == [f"faircal: {lacking} of 30 clusters (groups) lack calibration "
                         "pairs of both labels and use the global map"]


def test_fusion_scores_and_probabilities():
    """fusion: the mean z-score of the partners with the calibration side's means and SDs;
    fusion_lr: the logistic regression's probability."""
    im, ev, cal = _world()
    st = _settings(methods=("raw", "fusion", "fusion_lr"))
    res = learn_and_apply(im, ev, cal, st)
    fu = fusion_fit(("other", "this"), cal.partners, cal.label)
    assert res.learned["fusion"].models == ["other", "this"]
    np.testing.assert_array_equal(res.scores["fusion"], fu.mean_z(ev.partners))
    np.testing.assert_array_equal(res.cal_scores["fusion"], fu.mean_z(cal.partners))
    np.testing.assert_array_equal(res.scores["fusion_lr"], fu.probability(ev.partners))
    np.testing.assert_array_equal(res.probs["fusion_lr"], res.scores["fusion_lr"])
    only = learn_and_apply(im, ev, cal, _settings(methods=("raw", "fusion_lr")))
    assert list(only.scores) == ["raw", "fusion_lr"] and "fusion" not in only.cal_scores
    only = learn_and_apply(im, ev, cal, _settings(methods=("raw", "fusion")))
    assert list(only.scores) == ["raw", "fusion"] and "fusion_lr" not in only.probs
    np.testing.assert_array_equal(only.scores["fusion"], fu.mean_z(ev.partners))


def test_ks_probabilities_use_each_methods_bounds():
    """raw: a cosine's [-1, 1]; FSN and group thresholds: their own bounds; a cohort or
    fusion score: the calibration scores' range widened by 5 % each side (a constant
    range by 5 % of 1e-12). Each probability is the global beta map fitted on that
    method's calibration scores within those bounds."""
    im, ev, cal = _world()
    res = learn_and_apply(im, ev, cal, _settings())
    lo, hi = float(res.cal_scores["znorm"].min()), float(res.cal_scores["znorm"].max())
    pad = 0.05 * (hi - lo)
    assert _ks_bounds("znorm", res.cal_scores["znorm"], res) == (lo - pad, hi + pad)
    assert _ks_bounds("raw", res.cal_scores["znorm"], res) == (-1.0, 1.0)
    assert _ks_bounds("fsn", res.cal_scores["fsn"], res) == res.learned["fsn"].bounds
    assert _ks_bounds("group_thresholds", cal.score, res) == \
        res.learned["group_thresholds"].bounds
    assert _ks_bounds("fusion", np.array([0.3, 0.3]), res) == (0.3 - 5e-14, 0.3 + 5e-14)
    maps = res.learned["ks_maps"]
    assert sorted(maps) == sorted(set(METHODS) - {"faircal", "oracle_cal", "fusion_lr"})
    for m, bmap in maps.items():
        lo, hi = _ks_bounds(m, res.cal_scores[m], res)
        want = beta_fit(res.cal_scores[m], cal.label, lo, hi)
        assert (bmap.a, bmap.b, bmap.c, bmap.lo, bmap.hi) == \
            (want.a, want.b, want.c, lo, hi), m
        np.testing.assert_array_equal(res.probs[m], want(res.scores[m]))
    assert list(res.scores) == list(METHODS) == list(res.probs)


def test_start_and_finish_keep_the_methods_order_and_log_notes(caplog):
    """start: raw scores of both sides as float64; finish: scores and probabilities in
    the settings' order (only those computed), each note logged at INFO."""
    im, ev, cal = _world()
    ev32 = Side(ev.ia, ev.ib, ev.score.astype(np.float32), ev.label)
    res = start(ev32, cal)
    assert res.scores["raw"].dtype == np.float64 and res.cal_scores["raw"].dtype == np.float64
    res.scores.update({"b": np.zeros(1), "a": np.ones(1)})
    res.probs.update({"a": np.ones(1), "raw": np.zeros(1)})
    res.notes += ["first note", "second note"]
    with caplog.at_level(logging.INFO, logger="facecast.mitigation.methods"):
        out = finish(res, _settings(methods=("a", "raw", "c", "b")))
    assert list(out.scores) == ["a", "raw", "b"] and list(out.probs) == ["a", "raw"]
    assert [r.getMessage() for r in caplog.records] == ["first note", "second note"]
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_parts_are_in_the_order_every_later_one_needs():
    """k-means before FSN and FairCal (they read its codes); probabilities last (they read
    every method's scores)."""
    names = [what for what, _ in PARTS]
    assert names == ["znorm, tnorm, ztnorm, snorm, asnorm (one cohort)",
                     "k-means (fsn, faircal)", "fsn", "faircal", "oracle_cal",
                     "group_thresholds", "fusion, fusion_lr",
                     "probabilities for the KS error"]


def test_learned_depends_on_the_calibration_side_only():
    """Evaluated labels and partners changed: nothing learned moves (the module's promise,
    for a second seed: the cohort and k-means seeds follow it)."""
    im, ev, cal = _world()
    seed = 3
    st = _settings(seed=seed)
    a = learn_and_apply(im, ev, cal, st)
    ev2 = Side(ev.ia, ev.ib, ev.score, 1 - ev.label, ev.partners[:, ::-1].copy())
    b = learn_and_apply(im, ev2, cal, st)
    imgs = _cal_images(cal)
    assert a.learned["cohort"]["images"].tolist() == \
        im.ids[imgs[choose_cohort(30, 12, seed + 1)]].tolist()
    np.testing.assert_array_equal(a.learned["kmeans"]["faircal"]["centres"],
                                  fit_kmeans(im.emb[imgs], 6, seed + 2))
    np.testing.assert_array_equal(a.learned["fsn"].thresholds, b.learned["fsn"].thresholds)
    np.testing.assert_array_equal(a.learned["fusion"].weights, b.learned["fusion"].weights)
