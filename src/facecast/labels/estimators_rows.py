"""The rows of one estimate in the estimator report (:mod:`facecast.labels.estimators`):
counts, raw and age-standardised accuracy and MAE, their intervals, the unstratified and
the stratified tests of each group against the rest, one ``group_by`` at a time
(vectorised over its groups; :mod:`facecast.labels.estimators_strata`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from facecast.fairness.threshold import binomial_interval
from facecast.labels.estimators_stats import (
    bootstrap_mean_interval,
    fisher_p,
    row_seed,
    welch_p,
)
from facecast.labels.estimators_strata import (
    cmh_p,
    standardised,
    stratified_permutation_p,
)

#: the stratified tests' strata per group_by (``all`` has no test); a group inside one age
#: bin (``race x age``, ``gender x age``) is thereby tested within its bin
STRATA: dict[str, tuple[str, ...]] = {
    "race": ("age",), "gender": ("age",), "race x gender": ("age",), "age": ("race", "gender"),
    "race x age": ("age",), "gender x age": ("age",)}


@dataclass(frozen=True)
class Settings:
    """The ``estimators`` config section (see :meth:`from_config`)."""

    min_n: int = 30
    n_boot: int = 1000
    confidence: float = 0.95
    group_by: tuple[str, ...] = ("all", "race", "gender", "age", "race x gender",
                                 "race x age", "gender x age")
    seed: int = 0
    n_perm: int = 9999
    fairface_splits: tuple[str, ...] = ("val",)
    #: per estimator: dataset kind -> the splits it was trained on (overrides the built-in
    #: :data:`facecast.attributes.estimates.TRAINED_ON`)
    trained_on: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], seed: int) -> Settings:
        """Settings from the section (schema defaults filled in) and the run's seed;
        ``trained_on`` from ``estimators.imports.<name>.trained_on``."""
        imports = cfg.get("imports") or {}
        trained = {str(name): {str(k): tuple(str(x) for x in ([v] if isinstance(v, str) else v))
                               for k, v in ((spec or {}).get("trained_on") or {}).items()}
                   for name, spec in imports.items()}
        return cls(min_n=int(cfg.get("min_n", 30)), n_boot=int(cfg.get("n_boot", 1000)),
                   confidence=float(cfg.get("confidence", 0.95)),
                   group_by=tuple(cfg.get("group_by") or cls.group_by), seed=int(seed),
                   n_perm=int(cfg.get("n_perm", 9999)),
                   fairface_splits=tuple(cfg.get("fairface_splits", ("val",)) or ()),
                   trained_on={k: v for k, v in trained.items() if v})


@dataclass(frozen=True)
class Grouping:
    """One group_by over the images: each row's group code (-1: none) into ``names``, its
    test stratum code (-1: unknown), how many strata, their name (``strata``, '' for
    ``all``: no test) and whether age is one of its dimensions (no age-standardised
    figure then)."""

    name: str
    code: np.ndarray
    names: list[str]
    stratum: np.ndarray
    n_strata: int
    strata: str
    by_age: bool


@dataclass(frozen=True)
class Outcome:
    """What one estimate did per row: ``use`` the rows in its figures (not its training
    images), ``excluded`` its training images, ``found`` a face was detected (all True for
    an estimate that needs none), ``scored`` it has a value, ``right`` it is right, ``err``
    the absolute age error in years (NaN without one)."""

    use: np.ndarray
    excluded: np.ndarray
    found: np.ndarray
    scored: np.ndarray
    right: np.ndarray
    err: np.ndarray | None


def _count(flag: np.ndarray, g: Grouping) -> np.ndarray:
    ok = flag & (g.code >= 0)
    return np.bincount(g.code[ok], minlength=len(g.names))


def _wilson(k: np.ndarray, n: np.ndarray, s: Settings) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = binomial_interval(k, np.maximum(n, 1), s.confidence)
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def _std_notes(empty: list[list[int]], bins: tuple[str, ...], what: str) -> list[str]:
    return [f"{what}: n/a (no {'scored faces' if what == 'accuracy_std' else 'ages'} in "
            f"age bin {', '.join(bins[i] for i in e)})" if e else "" for e in empty]


def _tests(c: dict[str, np.ndarray], rest_tot: tuple[int, int], p: np.ndarray,
           rest_in: np.ndarray, s: Settings, what: str, i: int) -> tuple[float, float, str]:
    """(p_raw, p, note) of group i's accuracy tests (n/a: the rest is too small)."""
    k_tot, n_tot = rest_tot
    rest = n_tot - c["trials"][i]
    if rest == 0:
        return np.nan, np.nan, "p: n/a (the whole dataset: no rest to compare)"
    if rest < s.min_n:
        return np.nan, np.nan, f"p: n/a (the rest has {rest} {what} < estimators.min_n {s.min_n})"
    raw = fisher_p(int(c["n_right"][i]), int(c["trials"][i]), k_tot - int(c["n_right"][i]),
                   int(rest))
    if rest_in[i] < s.min_n:
        return raw, np.nan, (f"p: n/a (the rest in the group's strata has {int(rest_in[i])} "
                             f"{what} < estimators.min_n {s.min_n})")
    if not np.isfinite(p[i]):
        return raw, np.nan, "p: n/a (no stratum varies: every face right or every one wrong)"
    return raw, float(p[i]), ""


def accuracy_block(o: Outcome, g: Grouping, age: np.ndarray, bins: tuple[str, ...],
                   s: Settings, detector: bool) -> list[dict[str, Any]]:
    """The count and accuracy cells of every group of ``g`` (see the module docstring of
    :mod:`facecast.labels.estimators`)."""
    n = _count(o.use, g)
    c = {"n": n, "n_no_face": _count(o.use & ~o.found, g),
         "n_scored": _count(o.use & o.scored, g), "n_right": _count(o.use & o.right, g),
         "n_train_excluded": _count(o.excluded, g)}
    valid = o.use if detector else o.use & o.scored
    c["trials"] = n if detector else c["n_scored"]
    what = "images" if detector else "scored faces"
    lo, hi = _wilson(c["n_right"], c["trials"], s)
    alo, ahi = _wilson(c["n_right"], n, s)
    k = len(g.names)
    std, empty = (standardised(o.right.astype(float), g.code, age, valid, k, len(bins))
                  if not g.by_age else (np.full(k, np.nan), [[]] * k))
    p, rest_in = (cmh_p(o.right, g.code, g.stratum, valid, k, g.n_strata) if g.strata
                  else (np.full(k, np.nan), np.zeros(k)))
    tot = (int((o.right & valid).sum()), int(valid.sum()))
    std_notes = _std_notes(empty, bins, "accuracy_std")
    rows = []
    for i, name in enumerate(g.names):
        row: dict[str, Any] = {"group_by": g.name, "group": name, "stratified_by": g.strata,
                               **{key: int(v[i]) for key, v in c.items() if key != "trials"}}
        notes = []
        row["n_no_estimate"] = row["n"] - row["n_no_face"] - row["n_scored"]
        if n[i] >= s.min_n:
            row.update(accuracy_all=c["n_right"][i] / n[i], accuracy_all_lo=alo[i],
                       accuracy_all_hi=ahi[i])
        else:
            notes.append(f"accuracy_all: n/a ({n[i]} images < estimators.min_n {s.min_n})")
        if c["trials"][i] < s.min_n:
            notes.append(f"accuracy: n/a ({c['trials'][i]} {what} < estimators.min_n "
                         f"{s.min_n})")
            rows.append(row | {"note_list": notes})
            continue
        row.update(accuracy=c["n_right"][i] / c["trials"][i], accuracy_lo=lo[i],
                   accuracy_hi=hi[i])
        _standardised_cell(row, notes, "accuracy_std", g.by_age, std_notes[i], std[i])
        if g.strata:
            raw, pi, why = _tests(c, tot, p, rest_in, s, what, i)
            row.update(p_raw=raw, p=pi)
            notes += [why] if why else []
        else:
            notes.append("p: n/a (the whole dataset: no rest to compare)")
        rows.append(row | {"note_list": notes})
    return rows


def _standardised_cell(row: dict[str, Any], notes: list[str], column: str, by_age: bool,
                       why_not: str, value: float) -> None:
    """Put a group's age-standardised figure in ``row[column]``, or its n/a reason in
    ``notes`` (a grouping by age itself; an age bin the group lacks)."""
    if by_age:
        notes.append(f"{column}: n/a (the grouping is by age itself)")
    elif why_not:
        notes.append(why_not)
    else:
        row[column] = float(value)


def _errors(o: Outcome) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(err, have, x)``: age errors in years (NaN without), the rows scored with one,
    and the errors with 0 elsewhere (for vectorised sums)."""
    err = o.err if o.err is not None else np.full(len(o.use), np.nan)
    have = o.use & np.isfinite(err)
    return err, have, np.where(have, err, 0.0)


def permutation_tests(o: Outcome, groups: Sequence[Grouping], s: Settings, key: str
                      ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """:func:`facecast.labels.estimators_strata.stratified_permutation_p` of every grouping
    with strata, one set of permutations per strata (seeded by the estimate's ``key`` and
    the strata's name: a figure does not change with the other group_bys configured)."""
    err, have, x = _errors(o)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for strata in dict.fromkeys(g.strata for g in groups if g.strata):
        same = [g for g in groups if g.strata == strata]
        res = stratified_permutation_p(x, [g.code for g in same], same[0].stratum, have,
                                       [len(g.names) for g in same], same[0].n_strata,
                                       s.n_perm, row_seed(s.seed, f"{key}|{strata}|perm"))
        out.update({g.name: r for g, r in zip(same, res, strict=True)})
    return out


def mae_block(o: Outcome, g: Grouping, age: np.ndarray, bins: tuple[str, ...], s: Settings,
              key: str, tests: Mapping[str, tuple[np.ndarray, np.ndarray]]
              ) -> list[dict[str, Any]]:
    """The MAE cells of every group of ``g`` (years; only for an estimate in years against
    a truth in years; ``tests``: :func:`permutation_tests`)."""
    err, have, x = _errors(o)
    k = len(g.names)
    std, empty = (standardised(x, g.code, age, have, k, len(bins))
                  if not g.by_age else (np.full(k, np.nan), [[]] * k))
    p, rest_in = tests.get(g.name, (np.full(k, np.nan), np.zeros(k)))
    std_notes = _std_notes(empty, bins, "mae_std")
    out = []
    for i, name in enumerate(g.names):
        member = have & (g.code == i)
        mine, rest = err[member], err[have & ~member]
        row: dict[str, Any] = {"n_years": int(mine.size)}
        notes: list[str] = []
        if mine.size < s.min_n:
            out.append(row | {"note_list": [f"mae: n/a ({mine.size} scored faces with years "
                                            f"< estimators.min_n {s.min_n})"]})
            continue
        lo, hi = bootstrap_mean_interval(mine, s.n_boot, s.confidence,
                                         row_seed(s.seed, f"{key}|{g.name}|{name}"))
        row.update(mae=float(mine.mean()), mae_lo=lo, mae_hi=hi)
        _standardised_cell(row, notes, "mae_std", g.by_age, std_notes[i], std[i])
        if not rest.size:
            notes.append("p_mae: n/a (no rest with years to compare)")
        elif rest.size < s.min_n:
            notes.append(f"p_mae: n/a (the rest has {rest.size} < estimators.min_n {s.min_n})")
        else:
            row["p_mae_raw"] = welch_p(mine, rest)
            if rest_in[i] < s.min_n:
                notes.append(f"p_mae: n/a (the rest in the group's strata has "
                             f"{int(rest_in[i])} < estimators.min_n {s.min_n})")
            else:
                row["p_mae"] = float(p[i])
        out.append(row | {"note_list": notes})
    return out
