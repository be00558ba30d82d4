"""Issue 51: the survivors of mutation testing in :mod:`facecast.mitigation.replicates` and
:mod:`facecast.mitigation.metrics` (the table's metric names and their order).

A method's replicates are its state's figures on the identity counts of one seeded stream,
in draw order, the point estimate on unit counts (accuracy the 10-fold mean); no replicate
asked: empty arrays; no method: nothing.
"""

from __future__ import annotations

import warnings

import numpy as np
from test_mitigation_bootstrap import FAIRNESS, FARS, FMR, _pairs

from facecast.evaluate.resample import identity_counts
from facecast.mitigation import replicates
from facecast.mitigation.metrics import MethodState
from facecast.mitigation.ranked import PairCodes


def _state(ann):
    codes = PairCodes(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy())
    score = ann["score"].to_numpy(np.float64)
    return MethodState(ann, score, 1 / (1 + np.exp(-3 * score)), codes=codes, fars=FARS,
                       fmr=FMR, fairness=FAIRNESS), codes


def test_method_replicates_are_the_figures_of_one_seeded_draw_in_order():
    """Replicate b is the state's figure on the b-th identity count of
    ``default_rng(seed)`` (drawn all at once here: the draws do not depend on the batch);
    the point is the figure on unit counts with ``point=True``."""
    ann = _pairs(seed=2, n_ids=30)
    st, codes = _state(ann)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        point, reps = replicates.method_replicates(st, 21, 6)
        counts = np.vstack(list(identity_counts(codes.k, 21, np.random.default_rng(6),
                                                chunk=21)))
        want = st.metrics(counts)
        unit = st.metrics(np.ones((1, codes.k)), point=True)
    assert set(point) == set(want) == set(reps)
    for k, v in want.items():
        assert reps[k].shape == (21,) and np.array_equal(reps[k], v, equal_nan=True), k
        assert np.array_equal(point[k], unit[k][0], equal_nan=True), k
        assert isinstance(point[k], float)
    assert point["accuracy"] == st.accuracy and np.isfinite(st.accuracy)


def test_no_replicate_and_no_method():
    """``n_boot = 0``: the point estimates and an empty array per metric; no method: no
    group, no figure."""
    ann = _pairs(seed=2, n_ids=30)
    st, _ = _state(ann)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        point, reps = replicates.method_replicates(st, 0, 1)
    assert set(reps) == set(point) and all(v.shape == (0,) for v in reps.values())
    assert replicates.bootstrap(ann, {}, {}, fars=FARS, fmr=FMR, fairness=FAIRNESS,
                                n_boot=3, seed=0) == ([], {}, {})


def test_a_worker_task_gives_the_in_process_figures():
    """``_task`` (what a worker process runs, out of reach of the in-process tests): the
    state built from the compact annotated pairs gives the groups, point and replicates
    of the state built here."""
    ann = _pairs(seed=2, n_ids=30)
    st, _ = _state(ann)
    kw = {"fars": FARS, "fmr": FMR, "fairness": FAIRNESS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        groups, point, reps = replicates._task((replicates._compact(ann), st.score,
                                                1 / (1 + np.exp(-3 * st.score)), kw, 9, 3))
        want_point, want_reps = replicates.method_replicates(st, 9, 3)
    assert groups == st.groups == ["a", "b", "c", "d"]
    assert point.keys() == want_point.keys()
    for k, v in want_reps.items():
        assert np.array_equal(point[k], want_point[k], equal_nan=True), k
        assert len(reps[k]) == 9 and np.array_equal(reps[k], v, equal_nan=True), k


def test_worker_processes_from_two_workers_and_two_methods(monkeypatch):
    """Worker processes when ``workers > 1``, more than one method and the work reaches
    :data:`PROCESS_WORK`: two workers and two methods do (as many processes as the
    smaller), one worker or one method do not."""
    import contextlib

    pools = []

    @contextlib.contextmanager
    def pool(n):
        pools.append(n)
        yield type("Pool", (), {"map": staticmethod(map)})

    monkeypatch.setattr(replicates, "process_pool", pool)
    monkeypatch.setattr(replicates, "PROCESS_WORK", 1)
    ann = _pairs(seed=2, n_ids=30)
    score = ann["score"].to_numpy(np.float64)
    two = {"raw": score, "neg": -score}
    probs = {m: 1 / (1 + np.exp(-3 * s)) for m, s in two.items()}
    kw = {"fars": FARS, "fmr": FMR, "fairness": FAIRNESS, "n_boot": 2, "seed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        replicates.bootstrap(ann, two, probs, workers=2, **kw)
        replicates.bootstrap(ann, two, probs, workers=5, **kw)
        replicates.bootstrap(ann, two, probs, workers=1, **kw)
        replicates.bootstrap(ann, {"raw": score}, probs, workers=2, **kw)
    assert pools == [2, 2]


def test_metric_names_in_column_order_and_the_figures_carry_them():
    """The table's columns: accuracy, AUC, a TAR per FAR (``%g``), Bias+/-, the threshold;
    with groups the four disparities, FMR then FNMR per group; KS, then per group and
    FairCal's two summaries. Without groups only the first and ``ks``. A method's figures
    are exactly these, and every lower-is-better metric is one of them."""
    from facecast.mitigation.metrics import LOWER_IS_BETTER, metric_names

    assert metric_names([1e-5, 0.1], ["x", "y"]) == [
        "accuracy", "auc", "tar@far=1e-05", "tar@far=0.1", "bias_pos", "bias_neg",
        "threshold", "fmr_max_min", "fnmr_max_min", "fdr", "garbe", "fmr_x", "fmr_y",
        "fnmr_x", "fnmr_y", "ks", "ks_x", "ks_y", "ks_aad", "ks_mad"]
    assert metric_names([0.01], []) == ["accuracy", "auc", "tar@far=0.01", "bias_pos",
                                        "bias_neg", "threshold", "ks"]
    ann = _pairs(seed=2, n_ids=30)
    st, codes = _state(ann)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = st.metrics(np.ones((1, codes.k)), point=True)
    names = metric_names(FARS, st.groups)
    assert list(got) != [] and set(got) == set(names)
    assert set(LOWER_IS_BETTER) < set(names) and len(LOWER_IS_BETTER) == 8
