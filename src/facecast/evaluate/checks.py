"""Config checks of the evaluate stage, run before any job: the models and protocols it
names exist, every imported protocol's file or folder is there, and the one failure rule
(``evaluate.failed``, with its alias ``templates.failed``) is a rule and says one thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.bin_sets import bin_layout, implied_protocols
from facecast.config.fair_sets import implied_protocols as fair_protocols
from facecast.config.fair_sets import score_columns, score_only
from facecast.config.util import (
    datasets_of,
    embed_model_names,
    listing,
    name_list,
    protocol_names,
    section,
)
from facecast.evaluate.failures import DEFAULT_RULE, FAILED_RULES


def fill_failure_rule(config: dict[str, Any]) -> list[str]:
    """Fill ``evaluate.failed`` when left out: ``templates.failed`` (its alias) when that is
    given, else ``nonmatch``; then ``templates.failed`` from it, so every stage reads one
    rule. A plan line when the alias set the rule."""
    ev = config.get("evaluate")
    tp = config.get("templates")
    alias = tp.get("failed") if isinstance(tp, dict) else None
    if not isinstance(ev, dict) or "failed" in ev:
        return []
    ev["failed"] = alias if alias in FAILED_RULES else DEFAULT_RULE
    return ([f"evaluate: failed = {alias} (from its alias templates.failed): pairs without "
             "a feature count so in every rate"] if alias in FAILED_RULES else [])


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Plan lines naming the protocols each insightface ``.bin`` dataset implies (nothing
    is filled: :mod:`facecast.config.bin_sets` derives them wherever they are needed);
    ``evaluate.failed`` from its alias (:func:`fill_failure_rule`)."""
    lines = fill_failure_rule(config)
    for ds, spec in datasets_of(config).items():
        names = implied_protocols(spec)
        if names:
            how = {"cc11": "layout cc11: CAST's eleven blocks, 10 folds each",
                   "blocks": f"layout blocks: {len(names)} blocks from the .json sidecar, "
                             "10 folds each"}.get(bin_layout(spec), "insightface's 10 folds")
            lines.append(f"evaluate: dataset {ds} ({Path(str(spec.get('path'))).name}) implies "
                         f"protocol{'s' if len(names) > 1 else ''} {', '.join(names)} ({how})")
    return lines + fair_set_plan(config)


def fair_set_plan(config: Mapping[str, Any]) -> list[str]:
    """Plan lines of RFW and BFW datasets: their protocols and BFW's score models."""
    lines = []
    for ds, spec in datasets_of(config).items():
        names = fair_protocols(spec)
        if spec.get("kind") == "rfw":
            lines.append(f"evaluate: dataset {ds} (RFW) implies protocols {', '.join(names)} "
                         "(each set's pairs in file order, insightface's 10 folds; rfw = every "
                         "set, assessed by the later stages with the set as the group); "
                         f"results/{ds}/eval/rfw.md")
        elif spec.get("kind") == "bfw":
            models = score_columns(spec)
            images = ("no image is read (no embed model)" if score_only(config, ds)
                      else "the embed models run on its images too")
            lines.append(f"evaluate: dataset {ds} (BFW) implies protocol bfw (the datatable's "
                         f"pairs, its 5 folds); score models {', '.join(models) or '(none)'} "
                         f"from its columns; {images}")
    return lines


def unknown_names(key: str, listed: list[str], known: list[str], what: str,
                  hint: str = "") -> list[str]:
    """One error per name of ``listed`` (at ``key``) that is not in ``known``."""
    return [f"{key}[{i}]: unknown {what} {name!r}; known: {listing(known)}"
            + (f" ({hint})" if hint else "")
            for i, name in enumerate(listed) if name not in known]


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """``evaluate.models`` / ``benchmarks`` / ``imports.*.datasets`` exist; import files
    exist."""
    ev = section(config, "evaluate")
    errors = unknown_names("evaluate.models", name_list(ev.get("models")),
                           embed_model_names(config), "embed model", "embed.models")
    errors += unknown_names("evaluate.benchmarks", name_list(ev.get("benchmarks")),
                            protocol_names(config), "protocol",
                            "benchmarks, lfw for datasets with a pairs file, evaluate.imports")
    errors += failure_rule_errors(config)
    datasets = list(datasets_of(config))
    for name, imp in section(ev, "imports").items():
        imp = imp or {}
        errors += unknown_names(f"evaluate.imports.{name}.datasets",
                                name_list(imp.get("datasets")), datasets, "dataset")
        path = Path(str(imp.get("path", "")))
        fmt = imp.get("format", "cast_lists")
        if fmt == "cast_lists" and not path.is_dir():
            errors.append(f"evaluate.imports.{name}.path: folder {str(path)!r} of .list files "
                          "does not exist")
        elif fmt == "lfw_pairs" and not path.is_file():
            errors.append(f"evaluate.imports.{name}.path: pairs file {str(path)!r} does not "
                          "exist")
    return errors


def failure_rule_errors(config: Mapping[str, Any]) -> list[str]:
    """``evaluate.failed`` and its alias ``templates.failed`` are rules of
    :data:`facecast.evaluate.failures.FAILED_RULES`, and the same one when both are given."""
    errors = []
    given = {}
    for key, sect in (("evaluate.failed", section(config, "evaluate")),
                      ("templates.failed", section(config, "templates"))):
        if "failed" not in sect:
            continue
        if sect["failed"] not in FAILED_RULES:
            errors.append(f"{key}: {sect['failed']!r} is not a failure rule; one of "
                          f"{listing(list(FAILED_RULES))}")
        else:
            given[key] = sect["failed"]
    if len(set(given.values())) > 1:
        errors.append(f"templates.failed: {given['templates.failed']!r} differs from "
                      f"evaluate.failed {given['evaluate.failed']!r}; templates.failed is an "
                      "alias of evaluate.failed (one failure rule for every rate): set "
                      "evaluate.failed alone")
    return errors
