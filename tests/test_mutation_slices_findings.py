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
    assert out.p_beyond == pytest.approx([p_a, p_d], rel=1e-12)
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
    assert out.p_beyond == pytest.approx([p_ab], rel=1e-12)


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
    assert got.p_beyond == pytest.approx(want.p_beyond, rel=1e-9)
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
