"""The DAG side of the fairness stage: which fairness and demographics outputs a config
asks for (workflow/rules/fairness.smk; rule ``demographics`` in quality.smk).

Models: ``fairness.models``, else the evaluated models (``evaluate.models``, else every
embed model). Protocols: ``fairness.protocols``, else every evaluated protocol.
Imported systems (``fairness.imports``) join the models of their own protocol. Datasets:
``fairness.datasets``, else all. ``fairness.enabled: false`` asks for no fairness output.

The per-group analyses beyond one threshold (sections ``demographics`` here,
``identification`` and ``quality`` in their own stages) share :func:`section_models`,
:func:`section_protocols`, :func:`section_datasets` and :func:`fairness_groups`: each takes
its models, protocols and datasets from its own section, else from the fairness stage's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facecast.config.util import name_list
from facecast.evaluate.targets import (
    eval_benchmarks,
    eval_models,
    evaluated_protocols,
    protocol_applies,
)
from facecast.io.shard_index import FACES_INDEX

_names = name_list  # one definition: facecast.config.util.name_list


def imports(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``fairness.imports`` with the protocol default filled in."""
    raw = (config.get("fairness") or {}).get("imports") or {}
    return {str(k): {"protocol": "challenge", "label_column": "LABEL", **dict(v)}
            for k, v in raw.items()}


def protocols(config: Mapping[str, Any]) -> list[str]:
    """Evaluated protocols the fairness stage assesses: ``fairness.protocols``, else every
    evaluated protocol (:func:`facecast.evaluate.targets.evaluated_protocols`)."""
    return (_names((config.get("fairness") or {}).get("protocols"))
            or evaluated_protocols(config))


def models(config: Mapping[str, Any], protocol: str) -> list[str]:
    """Models assessed on ``protocol``: the configured ones, then imported systems."""
    out = _names((config.get("fairness") or {}).get("models")) or eval_models(config)
    out = list(out) if protocol in protocols(config) else []
    out += [m for m, imp in imports(config).items()
            if imp["protocol"] == protocol and m not in out]
    return out


def scores_path(config: Mapping[str, Any], ds: str, model: str, protocol: str) -> str:
    """Scored pairs of ``model`` on ``protocol``: the import, or the evaluation output."""
    imp = imports(config).get(model)
    if imp and imp["protocol"] == protocol:
        return f"results/{ds}/fairness/imported/{model}/{protocol}.parquet"
    return f"results/{ds}/eval/{model}/{protocol}.parquet"


def targets(config: Mapping[str, Any], ds: str, datasets: Sequence[str]) -> list[str]:
    """Default outputs for dataset ``ds``: each report and each protocol's leaderboard
    (none at all when ``fairness.enabled`` is false or no protected attribute is set; the
    plan says why, see :func:`facecast.fairness.checks.fill_defaults`)."""
    fcfg = config.get("fairness") or {}
    if not fcfg.get("enabled", True) or not fcfg.get("protected"):
        return []
    wanted = (config.get("fairness") or {}).get("datasets") or list(datasets)
    if ds not in wanted:
        return []
    here = set(eval_benchmarks(config, ds))
    names = ([p for p in protocols(config) if p in here]
             + [imp["protocol"] for imp in imports(config).values()])
    out = []
    for protocol in dict.fromkeys(names):
        ms = models(config, protocol)
        if ms:
            out += [f"results/{ds}/fairness/{m}/{protocol}/report.md" for m in ms]
            out.append(f"results/{ds}/fairness/leaderboard/{protocol}/leaderboard.md")
    return out


def rule_inputs(config: Mapping[str, Any], ds: str, model: str, protocol: str
                ) -> dict[str, Any]:
    """Inputs of rule ``fairness`` (the faces index stands for every faces shard)."""
    fcfg = config.get("fairness") or {}
    inputs: dict[str, Any] = {
        "scores": scores_path(config, ds, model, protocol),
        "attributes": f"results/{ds}/attributes.parquet",
        "manifest": f"results/{ds}/manifest.parquet",
    }
    if fcfg.get("hard_pairs_source", "faces") == "faces":
        inputs["faces"] = FACES_INDEX.format(ds=ds)
    dev = (fcfg.get("thresholds") or {}).get("from_protocol", "")
    if dev and dev != protocol:
        inputs["thresholds"] = f"results/{ds}/fairness/{model}/{dev}/thresholds.parquet"
    return inputs


def report_kw(name: str, caption: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model fairness output."""
    return {"caption": f"../report/{caption}.rst", "category": "Fairness",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}


#: where rule ``demographics`` writes
DEMOGRAPHICS_DIR = "results/{ds}/demographics/{model}/{protocol}"


def _section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(config.get(name) or {})


def section_enabled(config: Mapping[str, Any], name: str) -> bool:
    """Whether section ``name`` (``quality``, ``demographics``, ``identification``) is
    switched on (default on)."""
    return bool(_section(config, name).get("enabled", True))


def section_models(config: Mapping[str, Any], name: str) -> list[str]:
    """``<name>.models``, else ``evaluate.models``, else every embed model."""
    return (_names(_section(config, name).get("models"))
            or _names((config.get("evaluate") or {}).get("models"))
            or _names((config.get("embed") or {}).get("models")))


def section_protocols(config: Mapping[str, Any], name: str) -> list[str]:
    """``<name>.protocols``, else the fairness stage's protocols (``fairness.protocols``,
    else every evaluated protocol)."""
    return _names(_section(config, name).get("protocols")) or protocols(config)


def section_datasets(config: Mapping[str, Any], name: str) -> list[str]:
    """``<name>.datasets``, else every dataset."""
    return _names(_section(config, name).get("datasets")) or _names(config.get("datasets"))


def fairness_groups(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fairness section the analyses take their groups from ({} when fairness is off,
    so no ``label_*`` column of a switched-off section is read)."""
    fair = dict(config.get("fairness") or {})
    return fair if fair.get("enabled", True) else {}


def no_protocol_reason(name: str) -> str:
    """Why section ``name`` writes nothing when it has no protocol to assess."""
    return (f"no evaluated protocol (add a benchmark, or set {name}.protocols or "
            "fairness.protocols)")


def demographics_skip_reason(config: Mapping[str, Any]) -> str:
    """Why the enabled ``demographics`` section writes nothing; '' when it runs. The same
    words go into the run's plan, with the key that turns the section on."""
    if not section_protocols(config, "demographics"):
        return no_protocol_reason("demographics")
    if not fairness_groups(config).get("protected"):
        return ("no fairness groups (fairness is off or fairness.protected is empty; set "
                "fairness.protected)")
    return ""


def demographics_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs of the ``demographics`` section for dataset ``ds``: each (model,
    protocol)'s per-group thresholds."""
    if (not section_enabled(config, "demographics")
            or ds not in section_datasets(config, "demographics")
            or demographics_skip_reason(config)):
        return []
    return [f"results/{ds}/demographics/{m}/{p}/group_thresholds.csv"
            for m in section_models(config, "demographics")
            for p in section_protocols(config, "demographics")
            if protocol_applies(config, ds, p)]


def demographics_report_kw(caption: str, name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model demographics output."""
    return {"caption": f"../report/{caption}.rst", "category": "Demographics",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}
