"""Config checks of the fairness stage, run before any job, and its defaults derived from
what the run produces.

:func:`fill_defaults` (run before the checks, see :func:`facecast.config.prepare.resolve_config`):
when the user's config leaves ``fairness.protected``, ``fairness.legitimate`` or
``fairness.soft_attributes`` out, they come from columns this run will have in every
assessed dataset - gender from a P(male) column (the ``age_gender`` or ``fairface``
scorer, or a dataset label), age from an age estimate, pose from the native scorer's
``yaw``. No default names a column only the demo has. Without a protected attribute the
stage is skipped, and the plan says why and which key turns it on.

:func:`config_errors`: names (datasets, models, protocols, the threshold protocol), the
"off" spellings users try, import files, bins, and every column the section names.

The ``demographics`` section (this stage's analyses beyond one threshold) is checked here
too (:func:`demographics_errors`, :func:`demographics_plan`); :func:`section_errors` checks
the names of every per-group analysis section (demographics, identification, quality).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import check_references, known_columns
from facecast.config.fair_sets import score_models
from facecast.config.util import (
    ATTRIBUTE_ONLY_KINDS,
    attribute_only,
    datasets_of,
    embed_model_names,
    fairness_enabled,
    listing,
    module_constant,
    name_list,
    need_file,
    protocol_names,
    section,
)
from facecast.fairness.race import source_columns
from facecast.fairness.targets import demographics_skip_reason, section_enabled

#: candidate columns per derived attribute, in order of preference
GENDER_COLUMNS = ("age_gender_male", "fairface_male", "label_male", "label_Male")
AGE_COLUMNS = ("age_gender_age", "label_age")
POSE_COLUMNS = ("yaw",)
#: a fairness benchmark's own groups (RFW's set, BFW's subgroup): the default protected
#: attribute where every assessed dataset has the column
SET_GROUPS = (("rfw_set", "label_rfw_set"), ("bfw_subgroup", "label_bfw_subgroup"))
#: what turns each candidate on, for the plan's hint
SOURCES = {"age_gender_male": "attributes.scorers: age_gender",
           "age_gender_age": "attributes.scorers: age_gender",
           "fairface_male": "attributes.scorers: fairface",
           "yaw": "attributes.scorers: native",
           "label_rfw_set": "datasets kind rfw", "label_bfw_subgroup": "datasets kind bfw"}
#: spellings of "nothing" that users put into name lists
OFF_WORDS = {"none", "off", "false", "no", "null", "disabled", "0"}

FAIRFACE_RACES_MODULE = "facecast.attributes.heads"


def assessed_datasets(config: Mapping[str, Any]) -> list[str]:
    """``fairness.datasets`` (the known ones), else every dataset with identities (not
    of an attribute-only kind)."""
    all_ds = [d for d in datasets_of(config) if not attribute_only(config, d)]
    return [d for d in name_list(section(config, "fairness").get("datasets"))
            if d in all_ds] or all_ds


def _common_columns(config: Mapping[str, Any]) -> set[str] | None:
    """Columns every assessed dataset will have (None when no dataset's are certain)."""
    known = known_columns(config)
    sets = [known.get(ds) for ds in assessed_datasets(config)]
    sets = [s for s in sets if s is not None]
    if not sets:
        return None
    return set.intersection(*sets)


def _first(candidates: tuple[str, ...], have: set[str]) -> str | None:
    return next((c for c in candidates if c in have), None)


def derived_groups(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What the run's columns offer: ``{"protected": .., "legitimate": .., "soft_attributes":
    ..}`` (each possibly empty)."""
    have = _common_columns(config) or set()
    gender = _first(GENDER_COLUMNS, have)
    age = _first(AGE_COLUMNS, have)
    pose = _first(POSE_COLUMNS, have)
    protected: dict[str, Any] = {}
    legitimate: dict[str, Any] = {}
    soft: dict[str, Any] = {}
    own = [(name, col) for name, col in SET_GROUPS if col in have]
    if own:  # RFW / BFW: the benchmark's own groups, as their papers report
        protected[own[0][0]] = {"column": own[0][1]}
    elif gender:
        protected["gender"] = {"column": gender, "bins": [0.5], "labels": ["female", "male"]}
        female = "fairface_female" if gender == "fairface_male" else f"1-{gender}"
        soft["gender"] = {"categories": {"male": gender, "female": female},
                          "pair_prob": "product"}
    races = [f"fairface_{r}" for r in module_constant(FAIRFACE_RACES_MODULE, "FAIRFACE_RACES")]
    if all(r in have for r in races):
        soft["race"] = {"categories": {r.removeprefix("fairface_"): r for r in races},
                        "pair_prob": "product"}
    if age:
        legitimate["age"] = {"column": age, "bins": [35, 65], "labels": ["A0", "A1", "A2"]}
    if pose:
        legitimate["pose"] = {"column": pose, "abs": True, "bins": [15], "labels": ["P0", "P1"]}
    return {"protected": protected, "legitimate": legitimate, "soft_attributes": soft}


def _describe(groups: Mapping[str, Any]) -> str:
    parts = []
    for name, spec in groups.items():
        cols = [spec["column"]] if "column" in spec else list(spec["categories"].values())
        src = sorted({SOURCES[c] for c in cols if c in SOURCES})
        parts.append(f"{name} from {', '.join(cols)}" + (f" ({'; '.join(src)})" if src else ""))
    return "; ".join(parts)


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Fill the fairness keys the user left out (``absent`` holds their key paths) from
    the run's columns; return plan lines saying what was derived or why the stage is
    skipped."""
    if not fairness_enabled(config):
        return ["fairness: off (fairness.enabled: false)", *demographics_plan(config)]
    if datasets_of(config) and not assessed_datasets(config):
        return ["fairness: skipped - no dataset with identities (kinds "
                f"{', '.join(ATTRIBUTE_ONLY_KINDS)} are attribute benchmarks: nothing to "
                "verify)", *demographics_plan(config)]
    fcfg = config.setdefault("fairness", {})
    derived = derived_groups(config)
    lines: list[str] = []
    for key in ("protected", "legitimate", "soft_attributes"):
        if f"fairness.{key}" in absent and not fcfg.get(key):
            fcfg[key] = derived[key]
            if derived[key]:
                lines.append(f"fairness.{key}: derived - {_describe(derived[key])}")
    if not fcfg.get("protected"):
        how = ("set fairness.protected (e.g. gender: {column: <P(male) column>, bins: [0.5], "
               "labels: [female, male]}) or add age_gender to attributes.scorers")
        lines.append(f"fairness: skipped - no protected attribute (fairness.protected is "
                     f"empty and no column of this run can stand for one); {how}")
    else:
        base = str(section(fcfg, "leaderboard").get("baseline") or "")
        lines.append("fairness: a figure comparing groups (Bias+/-, FDR, GARBE, ratios) needs "
                     "two groups with usable pairs; with fewer it reads n/a (1 group: <g>) "
                     "and the model has no leaderboard rank; leaderboard: "
                     + (f"only models whose accuracy beats the baseline {base} rank" if base
                        else "no baseline (fairness.leaderboard.baseline), no accuracy bar"))
    return lines + demographics_plan(config)


def is_active(config: Mapping[str, Any]) -> bool:
    """Whether the fairness stage runs: enabled and at least one protected attribute."""
    return fairness_enabled(config) and bool(section(section(config, "fairness"), "protected"))


def _unknown(key: str, listed: list[str], known: list[str], what: str,
             hint: str = "") -> list[str]:
    out = []
    for i, name in enumerate(listed):
        if name in known:
            continue
        if name.strip().lower() in OFF_WORDS:
            out.append(f"{key}[{i}]: {name!r} is not a {what}; to switch the fairness stage "
                       "off write fairness.enabled: false ([] means all)")
            continue
        out.append(f"{key}[{i}]: unknown {what} {name!r}; known: {listing(known)}"
                   + (f" ({hint})" if hint else ""))
    return out


def name_errors(config: Mapping[str, Any]) -> list[str]:
    """Datasets, models, protocols and the threshold protocol the section names exist."""
    fcfg = section(config, "fairness")
    imports = section(fcfg, "imports")
    protocols = protocol_names(config)
    fprot = list(dict.fromkeys(protocols + [str((v or {}).get("protocol", "challenge"))
                                            for v in imports.values()]))
    errors = _unknown("fairness.datasets", name_list(fcfg.get("datasets")),
                      list(datasets_of(config)), "dataset")
    errors += _unknown("fairness.models", name_list(fcfg.get("models")),
                       embed_model_names(config) + score_models(config)
                       + name_list(imports), "model",
                       "embed.models, BFW score columns, fairness.imports")
    errors += _unknown("fairness.protocols", name_list(fcfg.get("protocols")), fprot,
                       "protocol", "benchmarks, lfw, evaluate.imports, fairness.imports "
                       "protocols")
    base = str(section(fcfg, "leaderboard").get("baseline") or "")
    every = embed_model_names(config) + score_models(config) + name_list(imports)
    known = name_list(fcfg.get("models")) or every
    # a misspelt fairness.models entry is its own error: not a second one about the baseline
    if base and base not in known and set(known) <= set(every):
        errors.append(f"fairness.leaderboard.baseline: {base!r} is not an assessed model; "
                      f"known: {listing(known)}")
    dev = str(section(fcfg, "thresholds").get("from_protocol") or "")
    if dev and dev not in fprot:
        errors.append(f"fairness.thresholds.from_protocol: unknown protocol {dev!r}; known: "
                      f"{listing(fprot)}")
    return errors


def bin_errors(config: Mapping[str, Any]) -> list[str]:
    """Bins ascending, labels matching, bins or values (not both)."""
    errors: list[str] = []
    fcfg = section(config, "fairness")
    for part in ("protected", "legitimate"):
        for name, spec in section(fcfg, part).items():
            spec = spec or {}
            key = f"fairness.{part}.{name}"
            bins = spec.get("bins")
            if bins is None:
                continue
            if list(bins) != sorted(bins):
                errors.append(f"{key}.bins: cut points must be ascending, got {bins}")
            labels = spec.get("labels")
            if labels and len(labels) != len(bins) + 1:
                errors.append(f"{key}.labels: {len(bins)} bins need {len(bins) + 1} "
                              f"labels, got {len(labels)}")
            if spec.get("values"):
                errors.append(f"{key}: give either bins (continuous column) or values "
                              "(categorical column), not both")
    return errors


def column_references(config: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """``(key path, column, datasets)`` of every column the section names."""
    fcfg = section(config, "fairness")
    fds = assessed_datasets(config)
    refs: list[tuple[str, str, list[str]]] = []
    for part in ("protected", "legitimate"):
        for name, spec in section(fcfg, part).items():
            if isinstance(spec, Mapping) and "column" in spec:
                # a derived race column (facecast.fairness.race) needs its seven sources
                refs += [(f"fairness.{part}.{name}.column", c, fds)
                         for c in source_columns([str(spec["column"])])]
    for name, spec in section(fcfg, "soft_attributes").items():
        for cat, col in section(spec, "categories").items():
            col = str(col)
            col = col[2:].strip() if col.startswith("1-") else col
            refs.append((f"fairness.soft_attributes.{name}.categories.{cat}", col, fds))
    return refs


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """The fairness stage's checks (only the demographics section's when
    ``fairness.enabled`` is false)."""
    if not fairness_enabled(config):
        return demographics_errors(config)
    errors = name_errors(config)
    for name, imp in section(section(config, "fairness"), "imports").items():
        for opt in ("predictions", "pairs"):
            if (imp or {}).get(opt):
                need_file(errors, f"fairness.imports.{name}.{opt}", imp[opt])
    return (errors + bin_errors(config) + check_references(config, column_references(config))
            + demographics_errors(config) + estimator_report_errors(config))


def estimator_report_errors(config: Mapping[str, Any]) -> list[str]:
    """``fairness.estimator_report`` names a configured dataset with truth labels (of an
    attribute-only kind: fairface, utkface)."""
    bench = str(section(config, "fairness").get("estimator_report") or "")
    if not bench:
        return []
    datasets = datasets_of(config)
    if bench not in datasets:
        return [f"fairness.estimator_report: {bench!r} is not a configured dataset; known: "
                f"{listing(list(datasets))} (add a dataset of kind fairface or utkface)"]
    if not attribute_only(config, bench):
        return [f"fairness.estimator_report: dataset {bench!r} (kind "
                f"{datasets[bench].get('kind')}) has no truth labels to check estimators "
                f"against; name a dataset of kind {' or '.join(ATTRIBUTE_ONLY_KINDS)}"]
    return []


def section_errors(config: Mapping[str, Any], name: str) -> list[str]:
    """Names a per-group analysis section (``demographics`` here; ``identification``,
    ``quality``) lists that do not exist: models, protocols (not for ``identification``:
    it searches a pool), datasets. Nothing when the section is off."""
    errs: list[str] = []
    cfg = section(config, name)
    if not cfg or not cfg.get("enabled", True):
        return errs
    benches = {"lfw", *protocol_names(config)}
    embed = set(name_list(section(config, "embed").get("models"))) | set(score_models(config))
    for m in name_list(cfg.get("models")):
        if embed and m not in embed:
            errs.append(f"{name}.models: {m!r} is not an embed model "
                        f"(embed.models: {sorted(embed)})")
    if name != "identification":
        for p in name_list(cfg.get("protocols")):
            if p not in benches:
                errs.append(f"{name}.protocols: {p!r} is not a benchmark, lfw or an "
                            f"evaluate import ({sorted(benches)})")
    for d in name_list(cfg.get("datasets")):
        if d not in name_list(config.get("datasets")):
            errs.append(f"{name}.datasets: {d!r} is not a configured dataset")
    return errs


def demographics_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``demographics`` section (cross-group FMR matrices, per-group
    thresholds, bands): its names, and matrix attributes that are no fairness group."""
    errs = section_errors(config, "demographics")
    d = section(config, "demographics")
    if d and d.get("enabled", True):
        fair = section(config, "fairness")
        allowed = ["group", *name_list(fair.get("protected")),
                   *name_list(fair.get("legitimate"))]
        for a in name_list(d.get("matrix_attributes")):
            if a not in allowed:
                errs.append(f"demographics.matrix_attributes: {a!r} is not 'group' or a "
                            f"fairness.protected/legitimate attribute ({allowed})")
    return errs


def demographics_plan(config: Mapping[str, Any]) -> list[str]:
    """The plan line of the ``demographics`` section when it is off or skipped."""
    if not section_enabled(config, "demographics"):
        return ["demographics: off (demographics.enabled: false)"]
    if why := demographics_skip_reason(config):
        return [f"demographics: skipped - {why}"]
    return []
