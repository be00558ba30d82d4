"""Config checks of ``estimators.imports`` (:mod:`facecast.labels.estimator_imports`),
run before any job: the predictions file exists and can be read, every column it names is
in it, every ``values`` entry maps onto a spelling facecast reads, ``trained_on`` names
splits that exist and ``datasets`` names attribute benchmarks. Each message names its
key."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.util import attribute_only

#: estimator names of the built-in estimates and the detector rows
RESERVED = ("detector", "age_gender", "fairface", "celeba40")
_SPLITS = {"fairface": ("train", "val")}


def _number_in(text: str, top: float) -> bool:
    """Whether ``text`` is a number in [0, ``top``]."""
    try:
        return 0.0 <= float(text) <= top
    except ValueError:
        return False


def _value_errors(key: str, attribute: str, mapping: Mapping[str, Any],
                  races: set[str]) -> list[str]:
    """``values.<attribute>`` entries whose target facecast cannot read."""
    from facecast.labels.estimator_imports import AGE_SPELLINGS, GENDER_WORDS, MAX_YEARS

    errs = []
    for given, target in mapping.items():
        t = str(target).strip()
        if attribute == "gender":
            ok = t.lower() in GENDER_WORDS or _number_in(t, 1.0)
            what = "Male, Female, M, F or a number in [0, 1]"
        elif attribute == "age":
            ok = t in AGE_SPELLINGS or _number_in(t, MAX_YEARS)
            what = f"one of FairFace's age bins or years in [0, {MAX_YEARS:g}]"
        else:
            ok = t.lower() in races
            what = f"a race of the datasets it predicts ({', '.join(sorted(races))})"
        if not ok:
            errs.append(f"{key}.values.{attribute}: {given!r} maps to {t!r}, which is not "
                        f"{what}")
    return errs


def _race_spellings(config: Mapping[str, Any], datasets: list[str]) -> set[str]:
    """Lower-case race spellings every one of ``datasets`` reads."""
    from facecast.datasets.fairface import FAIRFACE_RACES
    from facecast.datasets.utkface import UTK_RACES

    kinds = {str((config["datasets"][d] or {}).get("kind", "")) for d in datasets}
    spellings = {r.lower() for r in FAIRFACE_RACES}
    if "utkface" in kinds:  # FairFace's seven are collapsed; Asian / Others are UTKFace's
        spellings |= {r.lower() for r in UTK_RACES}
        if "fairface" in kinds:
            spellings -= {"asian", "others"}
    return spellings


def _file_errors(key: str, spec: Mapping[str, Any]) -> list[str]:
    """The file exists, its header can be read and has every column the entry names."""
    from facecast.labels.estimator_imports import ATTRIBUTES, header_of

    path = Path(str(spec.get("path", "")))
    if not path.is_file():
        return [f"{key}.path: {path} does not exist"]
    try:
        header = header_of(path)
    except Exception as exc:  # noqa: BLE001 (pyarrow and csv raise many types)
        return [f"{key}.path: cannot read the columns of {path}: {exc}"]
    return [f"{key}.{field}: column {spec[field]!r} is not in {path} (its columns: "
            f"{', '.join(header)})" for field in ("image", *ATTRIBUTES)
            if spec.get(field) and str(spec[field]) not in header]


def import_errors(config: Mapping[str, Any]) -> list[str]:
    """Problems of every ``estimators.imports`` entry (see the module docstring)."""
    imports = (config.get("estimators") or {}).get("imports") or {}
    benches = [d for d in (config.get("datasets") or {}) if attribute_only(config, d)]
    errs: list[str] = []
    for name, spec in imports.items():
        key = f"estimators.imports.{name}"
        spec = spec or {}
        if name in RESERVED:
            errs.append(f"{key}: {name!r} is the name of a built-in estimator; name the "
                        f"import otherwise (taken: {', '.join(RESERVED)})")
        attrs = [a for a in ("gender", "age", "race") if spec.get(a)]
        if not attrs:
            errs.append(f"{key}: names no column of gender, age or race")
        errs += _file_errors(key, spec)
        wanted = list(spec.get("datasets") or [])
        wrong = [d for d in wanted if d not in benches]
        if wrong:
            errs.append(f"{key}.datasets: {wrong} are not datasets of kind fairface or "
                        f"utkface (those configured: {benches})")
        races = _race_spellings(config, [d for d in wanted if d in benches] or benches)
        for attribute, mapping in (spec.get("values") or {}).items():
            if attribute not in attrs:
                errs.append(f"{key}.values.{attribute}: {key}.{attribute} names no column, "
                            "so nothing is mapped")
            errs += _value_errors(key, attribute, mapping or {}, races)
        for kind, splits in (spec.get("trained_on") or {}).items():
            given = [splits] if isinstance(splits, str) else list(splits)
            bad = [s for s in given if kind in _SPLITS and s not in _SPLITS[kind]]
            if bad:
                errs.append(f"{key}.trained_on.{kind}: {bad} are not splits of {kind} "
                            f"({', '.join(_SPLITS[kind])})")
    return errs
