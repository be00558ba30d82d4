"""Semantic config checks, run when the Snakefile is parsed: mistakes fail before any job.

The JSON schema (``workflow/schemas/config.schema.yaml``) checks types, enums and unknown
keys; :func:`check_config` checks what a schema cannot: that names refer to things that
exist, that files exist, that columns are produced by something, that ranges are ordered.
It collects *every* problem and raises one :class:`ConfigError` listing them all, each a
sentence that starts with the config key path (``fairness.protected.gender.column: ...``)
and says what to do. Notes that explain several errors (a dataset's known columns) follow
the list once.

The checks live beside the stages they serve: each stage package of
:data:`facecast.STAGES` may have a ``checks`` module with a function
``config_errors(config) -> list[str]`` (messages that start with the key path). This
module only runs them, in stage order, plus the checks that belong to no stage (device
spellings). A stage's ``checks`` module must be cheap (it runs at every parse, also in
cluster jobs), import no torch at module level, and report only mistakes that are
certain; :func:`facecast.config.util.warn` records a warning instead. Column checks use
the registry :mod:`facecast.config.columns`.

Other checkers can be added with :func:`register` (e.g. from a plugin).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from facecast import STAGES
from facecast.config.util import _NOTES, _WARNINGS, section, warn

__all__ = ["CHECKERS", "ConfigError", "check_config", "collect", "register"]

Checker = Callable[[Mapping[str, Any]], list[str]]

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:[0-9]+)?)$")


class ConfigError(ValueError):
    """One or more config mistakes; ``errors`` holds one message per mistake, ``notes``
    what explains them (printed once after the list)."""

    def __init__(self, errors: list[str], notes: list[str] | None = None) -> None:
        self.errors = list(errors)
        self.notes = list(notes or [])
        n = len(self.errors)
        head = f"{n} config mistake{'s' if n != 1 else ''} (nothing was run):"
        text = head + "".join(f"\n  - {e}" for e in self.errors)
        if self.notes:
            text += "\n" + "".join(f"\n  {m}" for m in self.notes)
        super().__init__(text)


def check_devices(config: Mapping[str, Any]) -> list[str]:
    """Device keys are spelled as devices; an explicit ``cuda`` without a GPU here is only a
    warning (a SLURM submit host has no GPU while its jobs do)."""
    errors: list[str] = []
    explicit = {f"{sec}.device": str(section(config, sec).get("device", "auto"))
                for sec in ("faces", "embed", "attributes", "mining", "identification")}
    for key, value in explicit.items():
        if not DEVICE_RE.match(value):
            errors.append(f"{key}: {value!r} is not a device; use auto, cpu, cuda or cuda:N"
                          + (" (for a GPU write cuda)" if "gpu" in value.lower() else ""))
    cuda = [k for k, v in explicit.items() if v.startswith("cuda") and DEVICE_RE.match(v)]
    if cuda and not _cuda_available():
        warn(f"{', '.join(cuda)}: cuda is set but torch sees no CUDA device on this host; "
             "that is fine on a submit host whose jobs run on GPU nodes, otherwise those jobs "
             "stop at start (set the device to auto or cpu)")
    return errors


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _stage_checker(module: str) -> Checker:
    """A checker that imports ``module`` only when it runs and calls its ``config_errors``
    (so the parse of a run imports only what checking needs)."""

    def run(config: Mapping[str, Any]) -> list[str]:
        return list(importlib.import_module(module).config_errors(config))

    run.__name__ = f"{module}.config_errors"
    return run


#: every stage's own checks, in stage order
STAGE_CHECKERS = [_stage_checker(f"facecast.{stage}.checks") for stage in STAGES
                  if importlib.util.find_spec(f"facecast.{stage}.checks") is not None]

#: the checks :func:`check_config` runs, in order
CHECKERS: list[Checker] = [*STAGE_CHECKERS, check_devices]


def register(checker: Checker) -> Checker:
    """Add ``checker`` to :data:`CHECKERS` (once); returns it, so it works as a decorator."""
    if checker not in CHECKERS:
        CHECKERS.append(checker)
    return checker


def collect(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Run every checker -> (errors, warnings). A checker that crashes is reported as an
    error naming it rather than hiding the others. Notes explaining the errors are in
    :func:`notes` until the next run."""
    _WARNINGS.clear()
    _NOTES.clear()
    errors: list[str] = []
    for checker in CHECKERS:
        try:
            found = checker(config)
        except Exception as exc:  # a bug in a check must not hide the other mistakes
            found = [f"(config check {getattr(checker, '__name__', checker)} failed: "
                     f"{type(exc).__name__}: {exc})"]
        errors += [e for e in found if e not in errors]
    warnings = list(_WARNINGS)
    _WARNINGS.clear()
    return errors, warnings


def notes() -> list[str]:
    """Notes of the last :func:`collect` run (e.g. the known columns of a dataset)."""
    return list(_NOTES)


def check_config(config: Mapping[str, Any]) -> None:
    """Check a (schema-validated) config; print warnings, raise one :class:`ConfigError`
    listing every mistake. Called by the Snakefile right after schema validation."""
    errors, warnings = collect(config)
    for w in warnings:
        print(f"facecast config warning: {w}", file=sys.stderr)
    if errors:
        raise ConfigError(errors, notes())
