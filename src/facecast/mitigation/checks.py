"""Config checks of the mitigation section, run before any job; each message names its
key. Also the mitigated models (``<model>+<method>``) that ``slices.models`` and
``compare.models`` may name: those stages check the embed model, this stage the method."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import datasets_of, name_list, protocol_names, section
from facecast.evaluate.targets import model_applies, protocol_applies
from facecast.fairness.checks import section_errors
from facecast.fairness.targets import section_datasets
from facecast.mitigation.auto import decide
from facecast.mitigation.targets import (
    METHODS,
    SCORE_ONLY_NOTE,
    calibration,
    calibration_source,
    dropped_methods,
    enabled,
    is_score_model,
    methods,
    models,
    protocols,
    run_methods,
    skip_reason,
    unavailable,
)
from facecast.slices.targets import split_model


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan lines of the mitigation section: on or off and by which rule (left out,
    ``mitigation.enabled`` follows the identities of each side of the calibration split,
    :mod:`facecast.mitigation.auto`; the datasets that pass become
    ``mitigation.datasets`` when it is empty), skipped, or methods left out."""
    lines: list[str] = []
    sec = config.setdefault("mitigation", {})
    if "mitigation.enabled" in absent:
        wanted = section_datasets(config, "mitigation")
        on, lines = decide(config, wanted)
        sec["enabled"] = bool(on)
        if on and len(on) < len(wanted) and not name_list(sec.get("datasets")):
            sec["datasets"] = on
    elif enabled(config):
        lines = ["mitigation: on (mitigation.enabled: true)"]
    if not enabled(config):
        return lines or ["mitigation: off (mitigation.enabled: false; true measures score "
                         "normalisation, FSN, FairCal, group thresholds and fusion side by "
                         "side)"]
    if why := skip_reason(config):
        return [*lines, f"mitigation: skipped - {why}"]
    return [*lines, *_method_lines(config)]


def _method_lines(config: Mapping[str, Any]) -> list[str]:
    """Plan lines of methods left out, per kind of model the stage runs on (embed models,
    BFW score columns), and of a score column's embedding methods that are n/a rows."""
    names = models(config)
    score = [m for m in names if is_score_model(config, m)]
    kinds = [(None, "")] if len(score) < len(names) else []
    kinds += [(score[0], " on BFW score columns")] if score else []
    lines = []
    for model, where in kinds:
        lines += [f"mitigation: {m} left out{where} - {why}"
                  for m, why in dropped_methods(config, model).items()]
    if score and (na := unavailable(config, score[0])):
        lines.append(f"mitigation: {', '.join(na)} n/a on the BFW score columns "
                     f"{', '.join(score)} (a score column has no embeddings: its table "
                     f"has these rows with note {SCORE_ONLY_NOTE!r})")
    return lines


def _calibration_errors(config: Mapping[str, Any]) -> list[str]:
    cal = calibration(config)
    errs: list[str] = []
    bench, ds = str(cal["benchmark"]), str(cal["dataset"])
    known = set(protocol_names(config)) | {"lfw"}
    if bench and bench not in known:
        errs.append(f"mitigation.calibration.benchmark: {bench!r} is not a benchmark, lfw "
                    f"or an evaluate import ({sorted(known)})")
    if ds and ds not in datasets_of(config):
        errs.append(f"mitigation.calibration.dataset: {ds!r} is not a configured dataset "
                    f"({sorted(datasets_of(config))})")
    folds = cal.get("folds", "auto")
    if (bench or ds) and folds not in ("auto", 1):
        errs.append(f"mitigation.calibration.folds: {folds!r} cross-fits the protocol's own "
                    "identities; a calibration source (mitigation.calibration.benchmark / "
                    ".dataset) is one fit - leave folds out (auto) or set 1")
    if bench and not ds and bench in protocols(config):
        errs.append(f"mitigation.calibration.benchmark: {bench!r} is a protocol the stage "
                    "evaluates: its identities would leave its own evaluated pairs; use "
                    "mitigation.calibration.fraction, another benchmark, or set "
                    "mitigation.calibration.dataset")
    if ds and ds in datasets_of(config) and not errs:
        for p in ([bench] if bench else protocols(config)):
            if p in known and not protocol_applies(config, ds, p):
                errs.append(f"mitigation.calibration.dataset: protocol {p!r} does not "
                            f"apply to dataset {ds!r}")
    return errs


def _score_source_errors(config: Mapping[str, Any]) -> list[str]:
    """A calibration source where a BFW score column the stage runs has no scores (a
    score column is scored on its own datatable's protocol only)."""
    errs: list[str] = []
    score = [m for m in models(config) if is_score_model(config, m)]
    for ds in section_datasets(config, "mitigation"):
        for p in protocols(config):
            src = calibration_source(config, ds, p)
            for m in score if src else []:
                if model_applies(config, ds, m, p) and \
                        not model_applies(config, src[0], m, src[1]):
                    errs.append(f"mitigation.calibration: the BFW score column {m!r} has no "
                                f"scored pairs on {src[1]!r} of dataset {src[0]!r} (a score "
                                "column is scored on its own datatable's protocol only)")
    return list(dict.fromkeys(errs))


def _method_errors(config: Mapping[str, Any]) -> list[str]:
    """Methods ``mitigation.methods`` names that no model of the stage can run."""
    asked = name_list(section(config, "mitigation").get("methods"))
    names = models(config) or [None]
    errs = []
    for m in asked:
        whys = [dropped_methods(config, x).get(m) or unavailable(config, x).get(m)
                for x in names]
        if all(whys):
            why = whys[0] if whys[0] != SCORE_ONLY_NOTE else (
                "needs embeddings; every model of the stage is a BFW score column")
            errs.append(f"mitigation.methods: {m!r} {why}")
    return errs


def mitigated_model_errors(config: Mapping[str, Any], key: str) -> list[str]:
    """Mistakes in the mitigated models ``<model>+<method>`` that ``<key>.models`` names:
    an unknown method, one this config's mitigation does not run, or the stage off."""
    errs = []
    for name in name_list(section(config, key).get("models")):
        model, method = split_model(name)
        if not method:
            continue
        if method not in METHODS:
            errs.append(f"{key}.models: {name!r}: {method!r} is not a mitigation method "
                        f"({', '.join(METHODS)})")
        elif not enabled(config):
            errs.append(f"{key}.models: {name!r} needs mitigation.enabled: true")
        elif method in unavailable(config, model):
            errs.append(f"{key}.models: {name!r}: {model!r} is a BFW score column and "
                        f"{method!r} needs embeddings (methods on score columns: "
                        f"{', '.join(run_methods(config, model))})")
        elif method not in methods(config, model):
            errs.append(f"{key}.models: {name!r}: the mitigation stage does not run "
                        f"{method!r} here (methods: {', '.join(run_methods(config, model))})")
    return errs


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in the ``mitigation`` section (names, calibration source, methods the
    config cannot run) and in mitigated model names of ``slices``/``compare``."""
    errs: list[str] = []
    for key in ("slices", "compare"):
        if section(config, key).get("enabled", True):
            errs += mitigated_model_errors(config, key)
    if not enabled(config):
        return errs
    cal = _calibration_errors(config)
    return [*section_errors(config, "mitigation"), *cal,
            *([] if cal else _score_source_errors(config)), *_method_errors(config), *errs]
