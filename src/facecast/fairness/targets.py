"""Which fairness outputs a config asks for (used by workflow/rules/fairness.smk).

Models: ``fairness.models``, else the evaluated models (``evaluate.models``, else every
embed model). Protocols: ``fairness.protocols``, else every evaluated protocol.
Imported systems (``fairness.imports``) join the models of their own protocol. Datasets:
``fairness.datasets``, else all. ``fairness.enabled: false`` asks for no fairness output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facecast.config.util import name_list
from facecast.evaluate.targets import eval_benchmarks, eval_models, evaluated_protocols
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
