"""The DAG side of the templates stage (workflow/rules/templates.smk): which datasets are
IJB releases, the models evaluated on them, the meta files a job reads and the outputs a
config asks for. Pure functions of the (validated) config; imported when the Snakefile is
parsed (stats a few files, reads none).

Datasets: every dataset of kind ``ijb`` (``templates.datasets`` narrows them). Models:
``templates.models``, else ``evaluate.models``, else every embed model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.util import name_list
from facecast.datasets.ijb import meta_files, one_n_files
from facecast.datasets.targets import name_regex
from facecast.evaluate.failures import rule_of
from facecast.fairness.targets import fairness_groups, section_enabled, section_models

__all__ = ["TEMPLATES_DIR", "datasets", "dataset_regex", "enabled", "job_config",
           "meta_inputs", "models", "one_n_inputs", "protected", "report_kw", "summary_inputs", "summary_targets",
           "targets"]

#: where rule ``templates_verify`` writes, per dataset and model
TEMPLATES_DIR = "results/{ds}/templates/{model}"


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the ``templates`` section is switched on (default on)."""
    return section_enabled(config, "templates")


def datasets(config: Mapping[str, Any]) -> list[str]:
    """The IJB datasets (kind ``ijb``) evaluated: ``templates.datasets``, else all."""
    ijb = [str(d) for d, s in (config.get("datasets") or {}).items()
           if isinstance(s, Mapping) and s.get("kind") == "ijb"]
    chosen = name_list((config.get("templates") or {}).get("datasets"))
    return [d for d in ijb if not chosen or d in chosen]


def dataset_regex(config: Mapping[str, Any]) -> str:
    """Wildcard constraint matching the IJB datasets."""
    return name_regex(datasets(config))


def models(config: Mapping[str, Any]) -> list[str]:
    """``templates.models``, else ``evaluate.models``, else every embed model."""
    return section_models(config, "templates")


def variant(config: Mapping[str, Any], ds: str) -> str:
    """The release (``ijbc`` / ``ijbb``) of dataset ``ds``."""
    return str(config["datasets"][ds].get("variant") or "ijbc")


def meta_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """The 1:1 meta files a ``templates_verify`` job of ``ds`` reads."""
    root = config["datasets"][ds]["root"]
    files = {k: str(v) for k, v in meta_files(root, variant(config, ds)).items()}
    return files


def has_one_n(config: Mapping[str, Any], ds: str) -> bool:
    """Whether the release of ``ds`` has the 1:N protocol CSVs."""
    return bool(one_n_files(config["datasets"][ds]["root"], variant(config, ds)))


def one_n_inputs(config: Mapping[str, Any], ds: str, model: str) -> dict[str, str]:
    """Inputs of ``templates_identify`` besides the templates: the 1:N CSVs of ``ds`` by
    role (``G1``, ``G2``, ``probe``) and, with protected groups, the templates' groups."""
    root = config["datasets"][ds]["root"]
    out = {k: str(v) for k, v in one_n_files(root, variant(config, ds)).items()}
    if protected(config):
        out["template_groups"] = f"{TEMPLATES_DIR.format(ds=ds, model=model)}/groups.parquet"
    return out


def summary_inputs(config: Mapping[str, Any], ds: str) -> dict[str, list[str]]:
    """Inputs of ``templates_summary``: every model's TAR table (and 1:N table)."""
    base = [TEMPLATES_DIR.format(ds=ds, model=m) for m in models(config)]
    out = {"tables": [f"{b}/tar_at_far.parquet" for b in base]}
    out["identification"] = ([f"{b}/identification.parquet" for b in base]
                             if has_one_n(config, ds) else [])
    return out


def summary_targets(ds: str) -> list[str]:
    """The all-models table of ``ds`` (rule ``templates_summary``)."""
    return [f"results/{ds}/templates/tar_at_far.csv", f"results/{ds}/templates/summary.html"]


def protected(config: Mapping[str, Any]) -> dict[str, Any]:
    """``fairness.protected`` when the fairness section is on ({} otherwise): the groups
    of rule ``templates_groups``."""
    return dict(fairness_groups(config).get("protected") or {})


def targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default outputs for ``ds``: each model's ROC (and group rates, with protected
    attributes) and the all-models table (IJB datasets only)."""
    if not enabled(config) or ds not in datasets(config):
        return []
    out = [f"{TEMPLATES_DIR.format(ds=ds, model=m)}/roc.png" for m in models(config)]
    if protected(config):
        out += [f"{TEMPLATES_DIR.format(ds=ds, model=m)}/group_rates.csv"
                for m in models(config)]
    return out + summary_targets(ds)


def job_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a templates job reads of the section (without ``models``/``datasets``, so
    adding a model reruns no other model's job)."""
    out = {k: v for k, v in dict(config.get("templates") or {}).items()
           if k not in ("models", "datasets", "enabled")}
    # templates.failed is an alias of evaluate.failed: one rule for every rate
    out["failed"] = out.get("failed") or rule_of(config)
    return out


def report_kw(name: str) -> dict[str, Any]:
    """Keyword arguments of Snakemake's ``report()`` for a per-model templates output."""
    return {"caption": "../report/templates.rst", "category": "IJB templates",
            "subcategory": "{ds}", "labels": {"model": "{model}", "file": name}}
