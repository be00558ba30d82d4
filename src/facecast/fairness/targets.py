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

from facecast.config.fair_sets import (
    BFW_FMR_TARGETS,
    BFW_PROTOCOL,
    kind_of,
    score_models,
    score_only,
)
from facecast.config.util import name_list
from facecast.evaluate.failures import rule_of
from facecast.evaluate.targets import (
    eval_benchmarks,
    eval_models,
    evaluated_protocols,
    model_applies,
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
    """Models assessed on ``protocol``: the configured ones (else the evaluated models and,
    on BFW's protocol, the datatable's score models), then imported systems."""
    listed = _names((config.get("fairness") or {}).get("models"))
    out = listed or eval_models(config) + (score_models(config)
                                           if protocol == BFW_PROTOCOL else [])
    out = list(dict.fromkeys(out)) if protocol in protocols(config) else []
    out += [m for m, imp in imports(config).items()
            if imp["protocol"] == protocol and m not in out]
    return out


def dataset_models(config: Mapping[str, Any], ds: str, protocol: str) -> list[str]:
    """:func:`models` of ``protocol`` that have scored pairs on ``ds`` (an imported system
    always; others per :func:`facecast.evaluate.targets.model_applies`)."""
    return [m for m in models(config, protocol) if m in imports(config)
            or model_applies(config, ds, m, protocol)]


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
        ms = dataset_models(config, ds, protocol)
        if ms:
            out += [f"results/{ds}/fairness/{m}/{protocol}/report.md" for m in ms]
            out.append(f"results/{ds}/fairness/leaderboard/{protocol}/leaderboard.md")
    return out


def rule_inputs(config: Mapping[str, Any], ds: str, model: str, protocol: str
                ) -> dict[str, Any]:
    """Inputs of rule ``fairness`` (the faces index stands for every faces shard; with
    ``fairness.estimator_report`` the attribute table of that benchmark)."""
    fcfg = config.get("fairness") or {}
    inputs: dict[str, Any] = {
        "scores": scores_path(config, ds, model, protocol),
        "attributes": f"results/{ds}/attributes.parquet",
        "manifest": f"results/{ds}/manifest.parquet",
    }
    if fcfg.get("hard_pairs_source", "faces") == "faces" and not score_only(config, ds):
        inputs["faces"] = FACES_INDEX.format(ds=ds)
    dev = (fcfg.get("thresholds") or {}).get("from_protocol", "")
    if dev and dev != protocol:
        inputs["thresholds"] = f"results/{ds}/fairness/{model}/{dev}/thresholds.parquet"
    bench = fcfg.get("estimator_report") or ""
    if bench:  # the attribute benchmark whose truth checks the estimated groups (issue 42)
        inputs["estimator_attributes"] = f"results/{bench}/attributes.parquet"
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


#: the sections that also assess BFW's score models (they read scored pairs only)
SCORE_SECTIONS = ("demographics", "slices")


def section_models(config: Mapping[str, Any], name: str) -> list[str]:
    """``<name>.models``, else ``evaluate.models``, else every embed model; with BFW's
    score models in the sections of :data:`SCORE_SECTIONS` (only on BFW's protocol: see
    :func:`facecast.evaluate.targets.model_applies`)."""
    listed = _names(_section(config, name).get("models"))
    if listed:
        return listed
    own = (_names((config.get("evaluate") or {}).get("models"))
           or _names((config.get("embed") or {}).get("models")))
    extra = score_models(config) if name in SCORE_SECTIONS else []
    return own + [m for m in extra if m not in own]


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
            if protocol_applies(config, ds, p) and model_applies(config, ds, m, p)]


def demographics_config(config: Mapping[str, Any], ds: str) -> dict[str, Any]:
    """The ``demographics`` section one job of dataset ``ds`` reads (the rule's params),
    with the keys whose default depends on the dataset filled in: ``global_pairs``
    (``same_group`` for kind ``bfw`` - BFW's own code fits its threshold on ``a1 == a2``
    pairs - else ``all``), ``fmr_targets`` (BFW's five for kind ``bfw``, else
    ``fairness.thresholds.fmr_targets``) and ``failed`` (``evaluate.failed``)."""
    out = dict(config.get("demographics") or {})
    bfw = kind_of(config, ds) == "bfw"
    if not out.get("global_pairs"):
        out["global_pairs"] = "same_group" if bfw else "all"
    if not out.get("fmr_targets"):
        fair = (config.get("fairness") or {}).get("thresholds") or {}
        out["fmr_targets"] = (list(BFW_FMR_TARGETS) if bfw else
                              list(fair.get("fmr_targets") or [1e-3, 1e-4]))
    out["failed"] = rule_of(config)
    return out


def demographics_report_kw(caption: str, name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model demographics output."""
    return {"caption": f"../report/{caption}.rst", "category": "Demographics",
            "subcategory": "{ds} / {protocol}", "labels": {"model": "{model}", "file": name}}


def bfw_table_paths(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """``model -> group_thresholds.parquet`` of every model the demographics section
    assesses on a BFW dataset's protocol ``bfw`` (rule ``bfw_table``; {} otherwise)."""
    if kind_of(config, ds) != "bfw":
        return {}
    have = set(demographics_targets(config, ds))
    where = f"results/{ds}/demographics/{{m}}/{BFW_PROTOCOL}/group_thresholds"
    return {m: where.format(m=m) + ".parquet" for m in section_models(config, "demographics")
            if where.format(m=m) + ".csv" in have}


def bfw_table_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """``results/<ds>/demographics/bfw_table.md`` / ``.html`` for a BFW dataset."""
    return ([f"results/{ds}/demographics/bfw_table.{ext}" for ext in ("md", "html")]
            if bfw_table_paths(config, ds) else [])
