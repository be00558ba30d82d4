"""Config checks of the mitigation section, run before any job; each message names its
key. Also the mitigated models (``<model>+<method>``) that ``slices.models`` and
``compare.models`` may name: those stages check the embed model, this stage the method."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import datasets_of, name_list, protocol_names, section
from facecast.evaluate.targets import protocol_applies
from facecast.fairness.checks import section_errors
from facecast.mitigation.targets import (
    METHODS,
    calibration,
    dropped_methods,
    enabled,
    methods,
    protocols,
    skip_reason,
)
from facecast.slices.targets import split_model


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan lines of the mitigation section: off, skipped, or methods left out."""
    if not enabled(config):
        return ["mitigation: off (mitigation.enabled: false; true measures score "
                "normalisation, FSN, FairCal, group thresholds and fusion side by side)"]
    if why := skip_reason(config):
        return [f"mitigation: skipped - {why}"]
    return [f"mitigation: {m} left out - {why}" for m, why in dropped_methods(config).items()]


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


def _method_errors(config: Mapping[str, Any]) -> list[str]:
    asked = name_list(section(config, "mitigation").get("methods"))
    drop = dropped_methods(config)
    return [f"mitigation.methods: {m!r} {drop[m]}" for m in asked if m in drop]


def mitigated_model_errors(config: Mapping[str, Any], key: str) -> list[str]:
    """Mistakes in the mitigated models ``<model>+<method>`` that ``<key>.models`` names:
    an unknown method, one this config's mitigation does not run, or the stage off."""
    errs = []
    for name in name_list(section(config, key).get("models")):
        _, method = split_model(name)
        if not method:
            continue
        if method not in METHODS:
            errs.append(f"{key}.models: {name!r}: {method!r} is not a mitigation method "
                        f"({', '.join(METHODS)})")
        elif not enabled(config):
            errs.append(f"{key}.models: {name!r} needs mitigation.enabled: true")
        elif method not in methods(config):
            errs.append(f"{key}.models: {name!r}: the mitigation stage does not run "
                        f"{method!r} here (methods: {', '.join(methods(config))})")
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
    return [*section_errors(config, "mitigation"), *_calibration_errors(config),
            *_method_errors(config), *errs]
