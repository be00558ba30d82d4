"""Group significant slices into *findings*: a short list of distinct effects, each
represented by one slice and listing the slices that are only other views of it.

One effect shows up as many significant slices (dark skin and female, dark skin and
long hair, dark skin and no beard, ...). SliceLine, DivExplorer and Slice Finder each
prune or summarise such redundancy; facecast groups (:func:`group_findings`, per error
type), greedily, best first:

1. The remaining significant slices are ordered by their SliceLine score *beyond the
   findings so far* - the score with each pair's expected excess error given the cell of
   findings it lies in subtracted (for the first finding: the plain score) - simplest first
   at equal score, then by text.
2. Walking that order, a slice **joins** the finding whose representative it overlaps
   most when that pair overlap (Jaccard of the two slices' relevant pairs) is at least
   ``slices.finding_overlap`` (0.5); else its effect **beyond** the findings so far is
   tested (:meth:`facecast.slices.testing.Design.test` stratified by the cells of the
   findings' representatives: for a slice inside one finding, the slice against the rest
   of that finding). An effect that does not reach the cut-off of a new finding adds
   nothing beyond them: the slice joins the finding it overlaps most (overlapping none, it
   waits for later findings; left over at the end, it stays in none, with a note). The
   first slice that reaches the cut-off opens the next finding; then the order is
   recomputed.
3. The cut-off: the first finding of an error type is any discovery (the family's
   Benjamini-Hochberg cut-off); every later one must reach BH's threshold of the k-th
   discovery, ``k fdr / m`` (k: the run's findings so far plus one, ``m``: the family's
   size) - a distinct effect needs the evidence of a new discovery.
4. Before a slice opens a finding, a significant parent (the slice less one predicate)
   that overlaps no finding and has an effect beyond them itself replaces it when the
   slice is only a part of the parent (the parent's excess errors beyond the findings,
   outside the slice, are at least the slice's) or adds nothing within it (the slice
   tested within the parent at ``fdr`` over the parent's children in the family, for the
   slice was picked as the best of them): a conjunction represents a finding only where
   its extra predicate matters ("the simplest slice that carries the effect").

Only representatives are compared (no chaining through members), so a finding's
representative overlaps every higher finding's by less than the threshold. At most
``slices.max_findings`` findings are opened; slices left then join by overlap only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from facecast.slices.search import score
from facecast.slices.testing import Design, Strata


@dataclass
class Candidate:
    """One significant slice: its table row, design indices and ranking keys."""

    row: int
    idx: np.ndarray
    errors: float
    depth: int
    text: str
    preds: frozenset[int] = frozenset()
    children: int = 1


@dataclass
class _One:
    """One slice's test: p and z."""

    p: float
    z: float


@dataclass
class Findings:
    """``finding[row]`` (1-based) of every grouped slice; per finding (in order) its
    representative row, conditional p beyond the higher findings, largest overlap with a
    higher representative and member rows; ``notes`` of ungrouped slices."""

    finding: dict[int, int] = field(default_factory=dict)
    reps: list[int] = field(default_factory=list)
    p_beyond: list[float] = field(default_factory=list)
    overlap_max: list[float] = field(default_factory=list)
    members: dict[int, list[int]] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)


class _Grouping:
    """The state of :func:`group_findings`: candidates by position, their pairs flattened
    (``flat``, cut at ``starts``) for vectorised sums, and the pair overlap of each with
    every representative (``inter``)."""

    def __init__(self, design: Design, cands: Sequence[Candidate], *, overlap: float,
                 unit: float, start: int, first: float, fdr: float, alpha: float,
                 confidence: float):
        self.design, self.overlap, self.unit, self.start = design, overlap, unit, start
        self.first, self.fdr = first, fdr
        self.resid = design.err_f - design.rate
        self.last_p: dict[int, float] = {}
        self.alpha, self.confidence = alpha, confidence
        self.cands = list(cands)
        self.remaining = list(cands)
        self.out = Findings()
        self.masks: list[np.ndarray] = []
        self.cell = np.zeros(design.n, np.int64)
        self.by_preds = {c.preds: c for c in cands if c.preds}
        self.open_rows = {c.row for c in cands}
        self.pos = {c.row: i for i, c in enumerate(cands)}
        self.sizes = np.array([len(c.idx) for c in cands], np.float64)
        self.errors = np.array([c.errors for c in cands], np.float64)
        self.flat = (np.concatenate([c.idx for c in cands]) if cands
                     else np.zeros(0, np.int64))
        self.starts = np.r_[0, np.cumsum(self.sizes)[:-1]].astype(np.int64)
        self.inter = np.zeros((len(cands), 0))

    def _sums(self, values: np.ndarray) -> np.ndarray:
        """Per candidate, the sum of a per-pair ``values`` over its pairs."""
        out = np.zeros(len(self.cands))
        nonempty = self.sizes > 0
        if self.flat.size:
            out[nonempty] = np.add.reduceat(values[self.flat], self.starts[nonempty])
        return out

    def test(self, idx: np.ndarray, strata: Strata | None) -> _One:
        """The (stratified) test of the slice of design pairs ``idx``."""
        return self.tests([idx], strata)[0]

    def tests(self, idxs: Sequence[np.ndarray], strata: Strata | None) -> list[_One]:
        """The (stratified) tests of several slices at once (one membership matrix)."""
        member = np.zeros((self.design.n, len(idxs)), bool)
        for k, idx in enumerate(idxs):
            member[idx, k] = True
        r = self.design.test(member, strata, self.confidence)
        return [_One(float(p), float(z)) for p, z in zip(r.p, r.z, strict=True)]

    def cutoff(self) -> float:
        """The p an effect beyond the findings must reach: Benjamini-Hochberg's threshold
        of the k-th discovery, ``k * fdr / m``, k counting this run's findings (earlier
        error types included) with the one to open."""
        return (self.start + len(self.masks) + 1) * self.unit

    def open_cutoff(self) -> float:
        """The p a slice's effect beyond the findings must reach to open the next finding:
        the first of its error type is any discovery (the family's cut-off ``first``),
        every later one a new effect at :meth:`cutoff`."""
        return (self.first if not self.masks else self.cutoff()) * (1 + 1e-9)

    def jaccard(self, c: Candidate) -> np.ndarray:
        """Pair overlap (Jaccard) of ``c`` with every representative."""
        return self.jaccards([self.pos[c.row]])[0]

    def jaccards(self, positions: Sequence[int]) -> np.ndarray:
        """Pair overlaps ``(len(positions), representatives)`` of candidates by position."""
        both = self.inter[positions]
        reps = self.sizes[[self.pos[r] for r in self.out.reps]]
        return both / np.maximum(self.sizes[positions][:, None] + reps[None, :] - both, 1.0)

    def join(self, c: Candidate, k: int) -> None:
        self.out.finding[c.row] = k + 1
        self.out.members[k + 1].append(c.row)

    def ordered(self, excess: np.ndarray | None) -> list[Candidate]:
        """Remaining slices by score beyond the findings (``excess``: each pair's expected
        error above the mean given its cell; simplest first at ties)."""
        adjusted = self.errors - (0.0 if excess is None else self._sums(excess))
        sc = score(adjusted, self.sizes, self.design.n, self.design.rate, self.alpha)
        keys = [(-float(sc[self.pos[c.row]]), c.depth, c.text) for c in self.remaining]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return [self.remaining[i] for i in order]

    def step(self) -> bool:
        """Group slices until one opens a finding; False when none is left to open one.
        The tests run in growing blocks of the slices next in line (the cells do not change
        within a step)."""
        st = self.design.strata(self.cell, ordered=True) if self.masks else None
        excess = None if st is None else st.rates[st.codes] - self.design.rate
        self.resid = self.design.err_f - (self.design.rate if st is None
                                          else st.rates[st.codes])
        line = self.ordered(excess)
        jacs = self.jaccards([self.pos[c.row] for c in line])
        joins = list(jacs.max(1) >= self.overlap) if jacs.shape[1] else [False] * len(line)
        done: set[int] = set()
        results: dict[int, _One] = {}
        block, opened = 4, False
        for i, c in enumerate(line):
            jac = jacs[i]
            done.add(c.row)
            if joins[i]:
                self.join(c, int(jac.argmax()))
                continue
            if c.row not in results:
                batch = [x for x, j in zip(line[i:], joins[i:], strict=True) if not j][:block]
                results.update(zip([x.row for x in batch],
                                   self.tests([x.idx for x in batch], st), strict=True))
                block = min(4 * block, 256)
            res = results[c.row]
            if res.p <= self.open_cutoff():
                chain = self.simplest(c, res, done)
                rep, rep_res = chain[-1]
                rep_jac = self.jaccard(rep)
                self.open(rep, rep_res.p, float(rep_jac.max()) if len(rep_jac) else 0.0)
                for other, _ in chain[:-1]:
                    self.join(other, len(self.masks) - 1)
                opened = True
                break
            if len(jac) and jac.max() > 0:
                self.join(c, int(jac.argmax()))
            else:  # overlaps no finding (yet): stays in line for the next ones
                done.discard(c.row)
                self.last_p[c.row] = res.p
        self.remaining = [c for c in self.remaining if c.row not in done]
        self.open_rows -= done
        return opened

    def simplest(self, c: Candidate, res: _One, done: set[int]
                 ) -> list[tuple[Candidate, _One]]:
        """From ``c`` to the simplest slice carrying its effect (the last of the chain):
        a significant, ungrouped parent (``c`` less one predicate) that overlaps no finding
        and has an effect beyond the findings itself replaces ``c`` when ``c`` adds nothing
        within it (``c`` tested within the parent, at ``fdr`` over the parent's children:
        ``c`` was picked as the best of them) or when ``c`` is only a part of it (the
        parent's excess errors beyond the findings, outside ``c``, are at least ``c``'s).
        A conjunction is reported only where its extra predicate matters."""
        k = len(self.masks)
        chain = [(c, res)]
        while len(c.preds) > 1:
            step = self._parent(c, k, done)
            if step is None:
                break
            c, res = step
            done.add(c.row)
            chain.append((c, res))
        return chain

    def _parent(self, c: Candidate, k: int, done: set[int]
                ) -> tuple[Candidate, _One] | None:
        """The first parent of ``c`` that may replace it (see :meth:`simplest`)."""
        for drop in sorted(c.preds):
            parent = self.by_preds.get(c.preds - {drop})
            if parent is None or parent.row in done or parent.row not in self.open_rows:
                continue
            jac = self.jaccard(parent)
            if len(jac) and jac.max() >= self.overlap:
                continue
            if not self._part_of(c, parent, k):
                continue
            beyond = self.test(parent.idx, self.design.strata(self.cell, ordered=True)
                               if k else None)
            if beyond.p <= self.open_cutoff():
                return parent, beyond
        return None

    def _part_of(self, c: Candidate, parent: Candidate, k: int) -> bool:
        """Whether ``c`` is only a part of ``parent``'s effect (see :meth:`simplest`)."""
        excess_c = float(self.resid[c.idx].sum())
        if float(self.resid[parent.idx].sum()) >= 2 * excess_c:
            return True
        inside = np.zeros(self.design.n, np.int64)
        inside[parent.idx] = 1
        within = self.design.strata(self.cell | (inside << k), ordered=True)
        return self.test(c.idx, within).p > self.fdr / max(parent.children, 1)

    def open(self, c: Candidate, p: float, overlap: float) -> None:
        k = len(self.masks)
        mask = np.zeros(self.design.n, bool)
        mask[c.idx] = True
        self.masks.append(mask)
        self.cell |= mask.astype(np.int64) << k
        self.inter = np.column_stack([self.inter, self._sums(mask.astype(np.float64))])
        self.out.reps.append(c.row)
        self.out.p_beyond.append(p)
        self.out.overlap_max.append(overlap)
        self.out.members[k + 1] = []
        self.out.finding[c.row] = k + 1

    def leftover(self, max_findings: int) -> None:
        """Slices left when no further finding opens (or ``max_findings`` are open): they
        join by overlap only; the others say why they are in no finding."""
        full = len(self.masks) >= max_findings
        for c in self.remaining:
            jac = self.jaccard(c)
            if len(jac) and jac.max() >= self.overlap:
                self.join(c, int(jac.argmax()))
            elif full:
                self.out.notes[c.row] = (f"in no finding: slices.max_findings "
                                         f"({max_findings}) findings are open")
            else:
                self.out.notes[c.row] = (
                    "in no finding: overlaps none, and its effect beyond them (p = "
                    f"{self.last_p.get(c.row, float('nan')):.2g}) does not reach the "
                    f"cut-off of a further finding ({self.cutoff():.2g})")
        self.remaining = []


def group_findings(design: Design, cands: Sequence[Candidate], *, overlap: float = 0.5,
                   unit: float, first: float, fdr: float = 0.05, start: int = 0,
                   max_findings: int = 20, alpha: float = 0.95, confidence: float = 0.95
                   ) -> Findings:
    """Group the significant slices ``cands`` of one error type into findings (see the
    module docstring); ``unit`` is ``fdr / m`` (``m``: the family's size), ``first`` the
    family's Benjamini-Hochberg p cut-off, ``start`` the findings of earlier error
    types."""
    g = _Grouping(design, cands, overlap=overlap, unit=unit, start=start, first=first,
                  fdr=fdr, alpha=alpha, confidence=confidence)
    while g.remaining and len(g.masks) < max_findings:
        if not g.step():
            break
    g.leftover(max_findings)
    return g.out
