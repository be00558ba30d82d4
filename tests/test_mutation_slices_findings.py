"""Issue 51: grouping significant slices into findings (facecast.slices.findings) on a
hand-built design whose effects are known: the cut-offs, the pair overlaps, the order
of the line, who opens, who joins, the simplest slice carrying an effect and the notes,
each checked against a count or a test computed here (facecast.slices.testing is the
oracle for p-values), so a mutant of `make mutate MODULES=slices.findings` fails here."""

from __future__ import annotations

import numpy as np
import pytest

from facecast.slices.findings import Candidate, _Grouping, group_findings
from facecast.slices.search import score
from facecast.slices.testing import Design

N_IDS, PER = 60, 5


def _world(d_lo: int = 40):
    """60 identities of 5 genuine pairs. A (identities 0-19) errs on 4 of 5 pairs where B
    (even identities) holds, 3 of 5 elsewhere; D (40-49) on 3 of 5; the rest on none,
    but for one pair of every third identity. The design keeps identity order."""
    ids = np.repeat(np.arange(N_IDS), PER)
    k = np.tile(np.arange(PER), N_IDS)
    a, b = ids < 20, ids % 2 == 0
    d = (ids >= d_lo) & (ids < d_lo + 10)
    err = np.where(a & b, k < 4, np.where(a, k < 3, np.where(d, k < 3, (k == 0)
                                                             & (ids % 3 == 0))))
    design = Design(ids, ids, err)
    assert (design.order == np.arange(len(ids))).all()
    traits = {"A": a, "B": b, "C": ids % 3 == 0, "D": d}
    return design, err, traits


def _cand(row, mask, err, preds, text, children=1):
    idx = np.flatnonzero(mask)
    return Candidate(row, idx, float(err[idx].sum()), len(preds), text, frozenset(preds),
                     children)


def _grouping(design, cands, **kw):
    args = dict(overlap=0.5, unit=0.001, start=0, first=0.01, fdr=0.05, alpha=0.95,
                confidence=0.95)
    return _Grouping(design, cands, **{**args, **kw})


def test_cutoffs_are_bh_thresholds_of_the_next_discovery():
    """Before any finding a slice opens at the family's cut-off ``first``; then at
    ``(start + findings + 1) * unit``, each a hair (1e-9 relative) above the value."""
    design, err, t = _world()
    cands = [_cand(0, t["A"], err, {0}, "A"), _cand(1, t["D"], err, {3}, "D")]
    g = _grouping(design, cands, unit=0.001, start=2, first=0.04)
    assert g.cutoff() == pytest.approx(0.003, rel=1e-12)
    assert 0.04 < g.open_cutoff() < 0.04 * (1 + 1e-8)
    g.open(cands[0], 1e-6, 0.0)
    assert g.cutoff() == pytest.approx(0.004, rel=1e-12)
    assert 0.004 < g.open_cutoff() < 0.004 * (1 + 1e-8)
    g.open(cands[1], 1e-5, 0.0)
    assert g.cutoff() == pytest.approx(0.005, rel=1e-12)


def test_pair_overlaps_and_sums_are_counted_over_the_candidates_pairs():
    """Jaccard of two slices' pairs, against every representative; per-candidate sums;
    an empty candidate sums to 0 and overlaps nothing."""
    design, err, t = _world()
    one = np.zeros(design.n, bool)
    one[7] = True
    masks = [t["A"], t["B"], t["A"] & t["B"], np.zeros(design.n, bool), t["D"], one]
    cands = [_cand(r, m, err, {r}, f"s{r}") for r, m in enumerate(masks)]
    g = _grouping(design, cands)
    assert g.jaccards([0, 1]).shape == (2, 0)
    values = np.arange(design.n, dtype=np.float64)
    np.testing.assert_allclose(g._sums(values), [values[m].sum() for m in masks])
    g.open(cands[0], 1e-6, 0.0)
    g.open(cands[4], 1e-5, 0.0)

    def jac(x, y):
        return (x & y).sum() / max((x | y).sum(), 1)

    g.open(cands[5], 1e-4, 0.0)
    want = np.array([[jac(m, masks[0]), jac(m, masks[4]), jac(m, one)] for m in masks])
    np.testing.assert_allclose(g.jaccards(list(range(6))), want, rtol=1e-12)
    assert want[5, 2] == 1.0                            # a one-pair slice with itself
    assert want[1, 0] == pytest.approx(10 / 40) and want[2, 0] == 0.5
    np.testing.assert_allclose(g.jaccard(cands[1]), want[1], rtol=1e-12)
    assert g.out.reps == [0, 4, 5] and g.out.finding == {0: 1, 4: 2, 5: 3}
    assert g.out.members == {1: [], 2: [], 3: []} and g.out.p_beyond == [1e-6, 1e-5, 1e-4]
    assert g.masks[1].sum() == t["D"].sum()
    # each pair's cell: bit k set when it is in finding k's representative
    assert g.cell.tolist() == (t["A"] * 1 + t["D"] * 2 + one * 4).tolist()


def test_the_line_is_by_score_beyond_the_findings_then_depth_then_text():
    """First step: SliceLine's score; ties by depth, then text. After a finding, each
    pair's excess expected error given its cell is taken off the slices' errors."""
    design, err, t = _world()
    masks = {"A": t["A"], "zB": t["A"] & t["B"], "yB": t["A"] & t["B"], "D": t["D"],
             "C": t["C"]}
    preds = {"A": {0}, "zB": {0, 1}, "yB": {1, 5}, "D": {3}, "C": {2}}
    cands = [_cand(r, masks[n], err, preds[n], n) for r, n in enumerate(masks)]
    g = _grouping(design, cands)
    sizes = np.array([m.sum() for m in masks.values()], np.float64)
    errs = np.array([err[m].sum() for m in masks.values()], np.float64)
    sc = score(errs, sizes, design.n, design.rate, 0.95)
    want = sorted(masks, key=lambda n: (-sc[list(masks).index(n)], len(preds[n]), n))
    assert [c.text for c in g.ordered(None)] == want
    assert want.index("yB") < want.index("zB")          # same slice: by text
    # beyond finding A: A's pairs lose their excess, so D leads
    g.open(cands[0], 1e-9, 0.0)
    st = design.strata(g.cell, ordered=True)
    excess = st.rates[st.codes] - design.rate
    adj = errs - np.array([excess[m].sum() for m in masks.values()])
    sc2 = score(adj, sizes, design.n, design.rate, 0.95)
    want2 = sorted(masks, key=lambda n: (-sc2[list(masks).index(n)], len(preds[n]), n))
    assert [c.text for c in g.ordered(excess)] == want2 and want2[0] == "D"


def test_group_findings_opens_the_simplest_slice_and_joins_the_rest():
    """A & B is the worst slice but only a part of A (A & B adds nothing within A): A
    represents finding 1 and A & B joins it; B and C overlap A too little and add
    nothing beyond it: they join A; D is a second effect beyond A: finding 2. Its p is
    D's test stratified by A's cells; its overlap with A is 0."""
    design, err, t = _world()
    masks = [t["A"] & t["B"], t["A"], t["B"], t["C"], t["D"], t["A"] & t["B"]]
    preds = [{0, 1}, {0}, {1}, {2}, {3}, {0, 7}]
    names = ["A & B", "A", "B", "C", "D", "A & B'"]
    children = [1, 1, 1, 1, 1, 1]
    cands = [_cand(r, m, err, p, s, c) for r, (m, p, s, c)
             in enumerate(zip(masks, preds, names, children, strict=True))]
    g = _grouping(design, cands)
    assert [c.text for c in g.ordered(None)][0] == "A & B"
    p_a = design.test(design.members(t["A"])).p[0]
    cells = design.strata(t["A"].astype(np.int64), ordered=True)
    p_d = design.test(design.members(t["D"]), cells).p[0]
    within = design.strata(t["A"].astype(np.int64), ordered=True)
    p_ab_in_a = design.test(design.members(t["A"] & t["B"]), within).p[0]
    assert p_a < 1e-4 and p_d < 0.002 and p_ab_in_a > 0.05
    out = group_findings(design, cands, unit=0.001, first=0.01)      # fdr 0.05: default
    assert out.reps == [1, 4]
    assert out.p_beyond == pytest.approx([p_a, p_d], rel=1e-12, abs=0)
    assert out.overlap_max == [0.0, 0.0]
    # A & B' overlaps A by exactly half (the threshold): it joins A untested
    assert out.finding == {0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 1}
    assert sorted(out.members[1]) == [0, 2, 3, 5] and out.members[2] == []
    assert out.notes == {}
    # one finding at most: the slices not yet in line when A opened (B, C, D) join by
    # overlap only (none reaches 0.5) and say why they are in none
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=0.05, max_findings=1)
    full = "in no finding: slices.max_findings (1) findings are open"
    assert out.reps == [1] and out.finding == {0: 1, 1: 1, 5: 1}
    assert out.notes == {2: full, 3: full, 4: full}
    # D's effect cannot reach a cut-off of 1e-12 beyond A: in no finding, with its p
    out = group_findings(design, cands, unit=1e-12, first=0.01, fdr=0.05)
    assert out.reps == [1] and out.finding == {0: 1, 1: 1, 2: 1, 3: 1, 5: 1}
    assert out.notes == {4: "in no finding: overlaps none, and its effect beyond them "
                            f"(p = {p_d:.2g}) does not reach the cut-off of a further "
                            f"finding ({2e-12:.2g})"}


def test_a_conjunction_that_matters_within_its_parent_represents_itself():
    """When A & B is tested within A below ``fdr / children`` (its parent has one child
    here, and the errors of A outside B are few), A & B is the finding, not A; A,
    overlapping it by half, joins it."""
    design, err, t = _world()
    err2 = err & ~(t["A"] & ~t["B"])                  # A outside B: no error at all
    design = Design(np.repeat(np.arange(N_IDS), PER), np.repeat(np.arange(N_IDS), PER),
                    err2)
    masks = [t["A"] & t["B"], t["A"]]
    cands = [_cand(0, masks[0], err2, {0, 1}, "A & B"), _cand(1, masks[1], err2, {0}, "A")]
    within = design.strata(t["A"].astype(np.int64), ordered=True)
    assert design.test(design.members(masks[0]), within).p[0] < 0.05
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=0.05)
    assert out.reps == [0] and out.finding == {0: 1, 1: 1} and out.members == {1: [1]}
    p_ab = design.test(design.members(masks[0])).p[0]
    assert out.p_beyond == pytest.approx([p_ab], rel=1e-12, abs=0)


def test_the_defaults_are_the_slices_config_defaults():
    """``group_findings``' declared defaults are the ``slices`` section's
    (finding_overlap, fdr, max_findings, alpha, confidence)."""
    import inspect

    from facecast.slices.discover import DEFAULTS

    params = inspect.signature(group_findings).parameters
    assert params["overlap"].default == DEFAULTS["finding_overlap"] == 0.5
    for key in ("fdr", "max_findings", "alpha", "confidence"):
        assert params[key].default == DEFAULTS[key], key
    assert params["start"].default == 0


def test_a_p_exactly_at_the_cut_off_opens_a_finding():
    """The cut-off is inclusive: A's p exactly equal to ``first * (1 + 1e-9)`` opens
    finding 1; a cut-off a float step below p does not (A, overlapping no finding, gets a
    note)."""
    design, err, t = _world()
    cands = [_cand(0, t["A"], err, {0}, "A")]
    p_a = float(design.test(design.members(t["A"])).p[0])
    first = p_a / (1 + 1e-9)
    for _ in range(100):
        if first * (1 + 1e-9) == p_a:
            break
        first = np.nextafter(first, np.inf if first * (1 + 1e-9) < p_a else -np.inf)
    assert first * (1 + 1e-9) == p_a
    out = group_findings(design, cands, unit=1e-12, first=first)
    assert out.reps == [0] and out.p_beyond == [p_a]
    below = np.nextafter(first, 0.0)
    while below * (1 + 1e-9) >= p_a:
        below = np.nextafter(below, 0.0)
    out = group_findings(design, cands, unit=1e-12, first=below)
    assert out.reps == [] and list(out.notes) == [0]


def test_findings_do_not_depend_on_the_order_pairs_are_given_in():
    """The same world with its pairs shuffled (the design's order is then not the
    caller's): the same findings, p-values and members as in identity order."""
    design, err, t = _world()
    perm = np.random.default_rng(5).permutation(design.n)
    ids = np.repeat(np.arange(N_IDS), PER)[perm]
    shuffled = Design(ids, ids, err[perm])
    assert not (shuffled.order == np.arange(design.n)).all()
    masks = [t["A"] & t["B"], t["A"], t["B"], t["C"], t["D"]]
    preds = [{0, 1}, {0}, {1}, {2}, {3}]
    names = ["A & B", "A", "B", "C", "D"]

    def cands(d, order):
        out = []
        for r, (m, p, s) in enumerate(zip(masks, preds, names, strict=True)):
            idx = np.flatnonzero(d.members(m[order]))
            out.append(Candidate(r, idx, float(err[m].sum()), len(p), s, frozenset(p)))
        return out

    want = group_findings(design, cands(design, np.arange(design.n)), unit=0.001,
                          first=0.01)
    got = group_findings(shuffled, cands(shuffled, perm), unit=0.001, first=0.01)
    assert got.reps == want.reps == [1, 4] and got.finding == want.finding
    assert got.p_beyond == pytest.approx(want.p_beyond, rel=1e-9, abs=0)
    assert {k: sorted(v) for k, v in got.members.items()} == \
        {k: sorted(v) for k, v in want.members.items()}


def test_a_later_finding_records_its_largest_overlap_with_an_earlier_one():
    """D moved to identities 18-27 shares identities 18 and 19 (10 pairs) with A: finding
    2's overlap with finding 1 is 10 / 140."""
    design, err, t = _world(d_lo=18)
    cands = [_cand(0, t["A"], err, {0}, "A"), _cand(1, t["D"], err, {3}, "D")]
    out = group_findings(design, cands, unit=0.01, first=0.01)
    assert out.reps == [0, 1]
    assert out.overlap_max == [0.0, pytest.approx(10 / 140, rel=1e-12)]


# --- worlds of identities with given error counts (5 genuine pairs each) -----------------


def _errs_world(errs):
    """Identity ``i`` has 5 genuine pairs, the first ``errs[i]`` of them errors; the design
    keeps identity order."""
    errs = np.asarray(errs)
    ids = np.repeat(np.arange(len(errs)), PER)
    err = np.tile(np.arange(PER), len(errs)) < errs[ids]
    design = Design(ids, ids, err)
    assert (design.order == np.arange(len(ids))).all()
    return design, ids, err


def _design_cands(design, order, err, specs):
    """Candidates of ``design`` whose pairs are the caller's pairs ``order`` (the design's
    input); ``specs``: (mask over the unshuffled pairs, predicates, text) per row."""
    out = []
    for r, (m, p, s) in enumerate(specs):
        idx = np.flatnonzero(design.members(m[order]))
        out.append(Candidate(r, idx, float(err[m].sum()), len(p), s, frozenset(p)))
    return out


def test_the_default_max_findings_is_20():
    """21 disjoint effects (2 identities of 3 errors in 5 each, among 40 identities without
    errors) that all reach a cut-off of 1: called without ``max_findings``, 20 open and the
    21st says why it is in none."""
    design, ids, err = _errs_world(np.r_[np.full(42, 3), np.zeros(40, int)])
    cands = [_cand(j, ids // 2 == j, err, {j}, f"s{j:02d}") for j in range(21)]
    out = group_findings(design, cands, unit=1.0, first=1.0)
    assert out.reps == list(range(20))
    assert out.notes == {20: "in no finding: slices.max_findings (20) findings are open"}


def test_the_first_line_subtracts_nothing_from_the_slices_errors():
    """Before any finding the line is by the plain score: a small slice (2 identities, 10
    errors in 10 pairs) leads a large one (20 identities, 60 errors in 100 pairs); one
    error less each would put the large one first."""
    design, ids, err = _errs_world(np.r_[np.full(2, 5), np.full(20, 3), np.zeros(40, int)])
    small, large = ids < 2, (ids >= 2) & (ids < 22)
    g = _grouping(design, [_cand(0, small, err, {0}, "small"),
                           _cand(1, large, err, {1}, "large")])
    sc = score(np.array([10.0, 60.0]), np.array([10.0, 100.0]), design.n, design.rate, 0.95)
    sc_less = score(np.array([9.0, 59.0]), np.array([10.0, 100.0]), design.n, design.rate,
                    0.95)
    assert sc[0] > sc[1] and sc_less[0] < sc_less[1]
    assert [c.text for c in g.ordered(None)] == ["small", "large"]


def _part_world():
    """A (identities 0-39, 4 errors in 5) is finding 1. Beyond it: C (identities 40-55, 4
    errors in 5: 64 in 80 pairs) and its parent P = C + identities 56-103 (84 errors in
    240 pairs, 1.75 per identity); 2 errors in the remaining 880 pairs. Outside A the
    rate is exactly 1/8 (150 / 1200), so each pair's residual beyond A is a multiple of
    1/8 and the sums are exact: P's residual errors 148 - 320 / 8 = 108 are exactly twice
    C's 64 - 80 / 8 = 54."""
    pc = np.r_[np.full(36, 2), np.full(12, 1)]
    bg = np.zeros(176, int)
    bg[:2] = 1
    design, ids, err = _errs_world(np.r_[np.full(40, 4), np.full(16, 4), pc, bg])
    a, c, p = ids < 40, (ids >= 40) & (ids < 56), (ids >= 40) & (ids < 104)
    return design, ids, err, a, c, p


def test_a_parent_with_twice_the_childs_excess_beyond_a_finding_replaces_it():
    """After finding A, the conjunction C = P & Q leads the line (its score beyond A beats
    P's) and reaches the cut-off of finding 2 (p beyond A below 2 * unit). P's residual
    errors beyond A (against the cell rates: 1/8 outside A) are exactly twice C's - not
    more: P's excess outside C equals C's - so C is only a part of P's effect, though C
    tested within P would matter (p < fdr): P, significant beyond A, is finding 2 (its p:
    P's test stratified by A's cells) and C joins it. The same in a shuffled design (the
    cells are in the design's order). (Against the overall rate P's residual is less
    than twice C's, as P is more than twice C's size.)"""
    design, ids, err, a, c, p = _part_world()
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    g = _grouping(design, cands)
    assert [x.text for x in g.ordered(None)] == ["A", "P & Q", "P"]
    cells = design.strata(a.astype(np.int64), ordered=True)
    assert cells.rates[0] == 0.125                                # outside A: 150 / 1200
    resid = design.err_f - cells.rates[cells.codes]
    assert resid[p].sum() == 2 * resid[c].sum() == 108.0
    over = design.err_f - design.rate
    assert over[p].sum() < 2 * over[c].sum()
    p_a = design.test(design.members(a)).p[0]
    p_c, p_p = design.test(design.members(np.c_[c, p]), cells).p
    within = design.strata(a.astype(np.int64) | (p.astype(np.int64) << 1), ordered=True)
    p_c_in_p = design.test(design.members(c), within).p[0]
    assert p_a < 0.01 and p_c < 0.002 and p_p < 0.002 and p_c_in_p < 0.05
    assert design.test(design.members(p)).p[0] > 1e6 * p_p      # unstratified: 1.5e-14
    out = group_findings(design, cands, unit=0.001, first=0.01)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.members == {1: [], 2: [1]}
    assert out.p_beyond == pytest.approx([p_a, p_p], rel=1e-12, abs=0)
    # shuffled: the same findings and p-values
    perm = np.random.default_rng(5).permutation(design.n)
    shuffled = Design(ids[perm], ids[perm], err[perm])
    assert not (shuffled.order == np.arange(design.n)).all()
    out = group_findings(shuffled, _design_cands(shuffled, perm, err, specs), unit=0.001,
                         first=0.01)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond == pytest.approx([p_a, p_p], rel=1e-9, abs=0)


def test_a_child_that_matters_within_its_parent_at_exactly_fdr_opens_itself():
    """The world of the last test with the parent P' = C + identities 56-87 (64 errors
    in 160 pairs): P''s residual errors beyond A, 54 + 64 - 20 = 98, are less than twice
    C's 54 (errors plus expected ones: 74 + 84 = 158 would be more than twice C's 74),
    so C is tested within P' (cells of A and P'; one child: at ``fdr / 1``). With
    ``fdr`` exactly that p, C matters (the test is strict): C is finding 2, and P', whose
    effect beyond A and C is still significant, finding 3. A float step lower, C adds
    nothing within P': P' is finding 2 and C joins it. (C's p beyond A alone is larger
    than its p within P'.)"""
    design, ids, err, a, c, _ = _part_world()
    p = (ids >= 40) & (ids < 88)
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P'")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    cells = design.strata(a.astype(np.int64), ordered=True)
    resid = design.err_f - cells.rates[cells.codes]
    assert resid[p].sum() == 98.0 and resid[c].sum() == 54.0
    expected = design.err_f + cells.rates[cells.codes]
    assert expected[p].sum() == 158.0 and expected[c].sum() == 74.0
    p_a = design.test(design.members(a)).p[0]
    p_c, p_p = design.test(design.members(np.c_[c, p]), cells).p
    within = design.strata(a.astype(np.int64) | (p.astype(np.int64) << 1), ordered=True)
    p_in = float(design.test(design.members(c), within).p[0])
    assert 1e-5 < p_in < p_c < 0.002 and p_p < 1e-12
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=p_in)
    cells2 = design.strata(a.astype(np.int64) | (c.astype(np.int64) << 1), ordered=True)
    p_p2 = design.test(design.members(p), cells2).p[0]
    assert out.reps == [0, 1, 2] and out.finding == {0: 1, 1: 2, 2: 3}
    assert out.p_beyond == pytest.approx([p_a, p_c, p_p2], rel=1e-12, abs=0)
    out = group_findings(design, cands, unit=0.001, first=0.01,
                         fdr=float(np.nextafter(p_in, 0.0)))
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond == pytest.approx([p_a, p_p], rel=1e-12, abs=0)


def test_a_parent_of_two_children_tests_the_child_at_fdr_over_two():
    """The world of the last test, P' now with two children in the family: C is tested
    within P' at ``fdr / 2``. With ``fdr`` exactly C's p within P', that p is above
    ``fdr / 2``: C adds nothing within P', so P' is finding 2 and C joins it (at
    ``fdr * 2`` C would matter and open finding 2 itself)."""
    design, ids, err, a, c, _ = _part_world()
    p = (ids >= 40) & (ids < 88)
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P'")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    cands[2].children = 2
    within = design.strata(a.astype(np.int64) | (p.astype(np.int64) << 1), ordered=True)
    p_in = float(design.test(design.members(c), within).p[0])
    cells = design.strata(a.astype(np.int64), ordered=True)
    p_p = float(design.test(design.members(p), cells).p[0])
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=p_in)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond[1] == pytest.approx(p_p, rel=1e-12, abs=0)


def test_a_parent_exactly_at_the_cut_off_replaces_its_child():
    """The world of the last tests with the parent P = C + identities 106-135 (no
    errors): P's p beyond A (5.6e-4) is above C's (1.4e-4). At ``fdr`` 1e-300 C adds
    nothing within P (any p is above it). With ``unit`` such that the cut-off of finding
    2, ``2 * unit * (1 + 1e-9)``, is exactly P's p, P replaces C (inclusive); a float step
    lower, C is finding 2 (P joins it)."""
    design, ids, err, a, c, _ = _part_world()
    p = c | ((ids >= 106) & (ids < 136))
    assert err[p & ~c].sum() == 0
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    cells = design.strata(a.astype(np.int64), ordered=True)
    p_a = float(design.test(design.members(a)).p[0])
    p_c = float(design.test(design.members(c), cells).p[0])        # one column each:
    p_p = float(design.test(design.members(p), cells).p[0])        # bit for bit
    assert 1e-4 < p_c < p_p < 1e-3
    cut = p_p / (1 + 1e-9)
    for _ in range(100):
        if cut * (1 + 1e-9) == p_p:
            break
        cut = np.nextafter(cut, np.inf if cut * (1 + 1e-9) < p_p else -np.inf)
    unit = cut / 2
    assert (0 + 1 + 1) * unit * (1 + 1e-9) == p_p
    out = group_findings(design, cands, unit=unit, first=0.01, fdr=1e-300)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond == pytest.approx([p_a, p_p], rel=1e-12, abs=0)
    assert out.p_beyond[1] == p_p                     # P's own test: exactly the cut-off
    out = group_findings(design, cands, unit=float(np.nextafter(unit, 0.0)), first=0.01,
                         fdr=1e-300)
    assert out.reps == [0, 1] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond == pytest.approx([p_a, p_c], rel=1e-12, abs=0)


def test_a_parent_overlapping_a_finding_by_half_is_passed_over_for_the_next():
    """C = P & Q of the equal-excess world has two parents: Q = A + identities 40-79,
    first in predicate order, overlaps A by exactly half (200 of 400 pairs) - it is
    passed over (and, at the end, joins A) though its effect beyond A is strong and C
    adds nothing within it at ``fdr`` 1e-300; the next parent, P, replaces C."""
    design, ids, err, a, c, p = _part_world()
    q = a | ((ids >= 40) & (ids < 80))
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P"), (q, {2}, "Q")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    g = _grouping(design, cands)
    g.open(cands[0], 1e-9, 0.0)
    assert g.jaccard(cands[3]).tolist() == [0.5]
    cells = design.strata(a.astype(np.int64), ordered=True)
    p_a = design.test(design.members(a)).p[0]
    p_c, p_p, p_q = design.test(design.members(np.c_[c, p, q]), cells).p
    assert max(p_c, p_p, p_q) < 0.002
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=1e-300)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 2, 2: 2, 3: 1}
    assert out.members == {1: [3], 2: [1]}
    assert out.p_beyond == pytest.approx([p_a, p_p], rel=1e-12, abs=0)


def test_a_slice_overlapping_a_finding_by_half_joins_it_untested_and_the_step_goes_on():
    """S = A + identities 40-79 overlaps A by exactly half (200 of 400 pairs) and has a
    strong effect beyond A (p 6e-16); D (identities 56-103, 84 errors in 240 pairs) has
    a smaller score beyond A than S. Step 2 walks S first: S joins A untested, and the
    step goes on to D, which opens finding 2."""
    design, ids, err, a, _, _ = _part_world()
    s = a | ((ids >= 40) & (ids < 80))
    d = (ids >= 56) & (ids < 104)
    specs = [(a, {0}, "A"), (s, {1}, "S"), (d, {2}, "D")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    g = _grouping(design, cands)
    g.open(cands[0], 1e-9, 0.0)
    cells = design.strata(a.astype(np.int64), ordered=True)
    assert [x.text for x in g.ordered(cells.rates[cells.codes] - design.rate)][:2] == \
        ["S", "D"]
    assert g.jaccard(cands[1]).tolist() == [0.5]
    p_a = design.test(design.members(a)).p[0]
    p_s, p_d = design.test(design.members(np.c_[s, d]), cells).p
    assert p_s < 1e-12 and p_d < 1e-12
    out = group_findings(design, cands, unit=0.001, first=0.01)
    assert out.reps == [0, 2] and out.finding == {0: 1, 1: 1, 2: 2}
    assert out.members == {1: [1], 2: []} and out.notes == {}
    assert out.p_beyond == pytest.approx([p_a, p_d], rel=1e-12, abs=0)


def test_the_line_beyond_a_finding_decides_which_effect_opens_next():
    """C (identities 40-55, 4 errors in 5) and F = identities 20-55 (half of A and C):
    by plain score F leads C (A's errors lift it), beyond A C leads F (A's pairs count at
    the overall rate). Both reach the cut-off of finding 2 - F with the smaller p - but C
    is walked first and opens it; F, then adding nothing beyond A and C, joins C (its
    largest overlap, 80 / 180)."""
    design, ids, err, a, c, _ = _part_world()
    f = (ids >= 20) & (ids < 56)
    specs = [(a, {0}, "A"), (c, {1}, "C"), (f, {2}, "F")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    g = _grouping(design, cands)
    assert [x.text for x in g.ordered(None)] == ["A", "F", "C"]
    g.open(cands[0], 1e-9, 0.0)
    cells = design.strata(a.astype(np.int64), ordered=True)
    assert [x.text for x in g.ordered(cells.rates[cells.codes] - design.rate)] == \
        ["C", "F", "A"]
    p_a = design.test(design.members(a)).p[0]
    p_c, p_f = design.test(design.members(np.c_[c, f]), cells).p
    assert p_f < p_c < 0.002
    out = group_findings(design, cands, unit=0.001, first=0.01)
    assert out.reps == [0, 1] and out.finding == {0: 1, 1: 2, 2: 2}
    assert out.p_beyond == pytest.approx([p_a, p_c], rel=1e-12, abs=0)


def test_a_parent_that_joined_a_finding_in_an_earlier_step_cannot_replace_a_child():
    """P = C + identities 106-145 (no errors) + identity 39 (one of A's): at ``alpha``
    0.5 (size weighs more) the line beyond A is P, F (identities 56-103), ..., C = P & Q
    last. Step 2: P's p beyond A (3.2e-3) misses the cut-off 0.002, so P joins A (it
    overlaps it a little); F opens finding 2. Step 3: C opens finding 3 - its parent P,
    though now significant beyond A and F (2.6e-6 < 0.003) and C adds nothing within it
    at ``fdr`` 1e-300, is no longer open and cannot replace it."""
    design, ids, err, a, c, _ = _part_world()
    f = (ids >= 56) & (ids < 104)
    p = c | ((ids >= 106) & (ids < 146)) | (ids == 39)
    specs = [(a, {0}, "A"), (c, {1, 2}, "P & Q"), (p, {1}, "P"), (f, {3}, "F")]
    cands = _design_cands(design, np.arange(design.n), err, specs)
    g = _grouping(design, cands, alpha=0.5)
    assert [x.text for x in g.ordered(None)] == ["A", "P", "F", "P & Q"]
    g.open(cands[0], 1e-9, 0.0)
    cells = design.strata(a.astype(np.int64), ordered=True)
    assert [x.text for x in g.ordered(cells.rates[cells.codes] - design.rate)] == \
        ["P", "F", "A", "P & Q"]
    cells3 = design.strata(a.astype(np.int64) | (f.astype(np.int64) << 1), ordered=True)
    p_a = design.test(design.members(a)).p[0]
    p_p2, p_f = design.test(design.members(np.c_[p, f]), cells).p
    p_p3, p_c3 = design.test(design.members(np.c_[p, c]), cells3).p
    assert p_p2 > 0.002 and p_f < 0.002 and p_p3 < 0.003 and p_c3 < 0.003
    out = group_findings(design, cands, unit=0.001, first=0.01, fdr=1e-300, alpha=0.5)
    assert out.reps == [0, 3, 1] and out.finding == {0: 1, 1: 3, 2: 1, 3: 2}
    assert out.p_beyond == pytest.approx([p_a, p_f, p_c3], rel=1e-12, abs=0)
