"""The DAG side of the evaluate stage (workflow/rules/evaluate.smk): which protocols each
dataset is evaluated on, the files the summary reads, the protocol wildcards and the part
of the config one evaluation job depends on.

Pure functions of the (validated) config, so the rule files stay free of logic. The mined
benchmarks and the reference model come from :mod:`facecast.analysis.targets`; the
protocols an ``insightface_bin`` dataset implies from :mod:`facecast.config.bin_sets`.
:func:`protocol_applies` says which protocol pairs images of which dataset (the later
stages assess a protocol only there); :func:`bin_suite_items` and :func:`cc11_items` list
what the ``.bin`` tables read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.analysis.targets import (
    benchmark_names,
    embed_models,
    is_bin_dataset,
    reference_model,
)
from facecast.config.bin_sets import (
    all_bin_protocols,
    bin_block,
    bin_layout,
    dataset_protocols,
)
from facecast.config.fair_sets import (
    RFW_ALL,
    kind_of,
    score_model_applies,
    score_models,
    score_only,
    set_datasets,
)
from facecast.config.fair_sets import all_protocols as all_set_protocols
from facecast.config.fair_sets import dataset_protocols as set_protocols
from facecast.datasets.targets import name_regex

#: the ``evaluate`` config keys one evaluation job depends on (its rule's params)
JOB_KEYS = ("fars", "thresholds", "include_val", "n_folds", "failed")


def job_config(evaluate_cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The part of the ``evaluate`` section one (model, benchmark) job reads, plus the seed.

    Only these go into the rule's params, so that editing ``evaluate.imports.<x>`` (or the
    model/benchmark lists) reruns only the jobs it concerns.
    """
    return {**{k: evaluate_cfg[k] for k in JOB_KEYS if k in evaluate_cfg}, "seed": int(seed)}


def imports(config: Mapping[str, Any]) -> dict[str, Any]:
    """``evaluate.imports``: protocol name -> import spec."""
    return dict((config.get("evaluate", {}) or {}).get("imports", {}) or {})


def _import_applies(config: Mapping[str, Any], name: str, ds: str) -> bool:
    """Whether import ``name`` pairs images of ``ds``: its ``datasets`` when given; else a
    ``.bin`` import applies to the insightface_bin datasets made from the same file only,
    and any other import to every dataset but those (whose paths are ``<bin>#<i>``
    locators no list or pairs file names)."""
    spec = imports(config)[name]
    wanted = spec.get("datasets")
    if wanted:
        return ds in wanted
    if spec.get("format") == "insightface_bin":
        # a .bin protocol pairs the images of the insightface_bin dataset made from the
        # same file: by default it applies to those datasets only
        name_ = Path(str(spec.get("path", ""))).name
        return (config["datasets"][ds].get("kind") == "insightface_bin"
                and Path(str(config["datasets"][ds].get("path", ""))).name == name_)
    return not is_bin_dataset(config, ds)


def bin_protocols(config: Mapping[str, Any], ds: str) -> list[str]:
    """The protocols an ``insightface_bin`` dataset implies ([] for other kinds; see
    :mod:`facecast.config.bin_sets`)."""
    return dataset_protocols(config, ds)


def implied_protocols(config: Mapping[str, Any], ds: str) -> list[str]:
    """Every protocol ``ds`` implies without an import: a ``.bin``'s, or an RFW / BFW
    dataset's (:mod:`facecast.config.fair_sets`)."""
    return bin_protocols(config, ds) + set_protocols(config, ds)


def protocol_applies(config: Mapping[str, Any], ds: str, name: str) -> bool:
    """Whether protocol ``name`` pairs images of dataset ``ds``.

    A mined benchmark applies to every dataset but ``insightface_bin`` ones (nothing is
    mined there), ``lfw`` to datasets with a pairs file, an import per
    :func:`_import_applies`, a ``.bin``'s implied protocol to its own dataset only. A name
    none of these knows (e.g. a ``fairness.imports`` protocol) is left to its stage: True.
    """
    if name in implied_protocols(config, ds):
        return True
    imps = imports(config)
    if name in imps and _import_applies(config, name, ds):
        return True
    if name in benchmark_names(config) and not is_bin_dataset(config, ds):
        return True
    if name == "lfw" and config["datasets"][ds].get("pairs"):
        return True
    known = (name in imps or name in benchmark_names(config) or name == "lfw"
             or name in all_bin_protocols(config) or name in all_set_protocols(config))
    return not known


def protocol_spec(config: Mapping[str, Any], ds: str, name: str) -> dict[str, Any]:
    """What rule ``import_protocol`` imports as ``results/<ds>/protocols/<name>.parquet``:
    the dataset's implied ``.bin`` protocol (``format``, ``path``, ``layout``, ``block``),
    else the import ``name`` when it applies to ``ds``; an error naming both otherwise (a
    protocol is never imported against a dataset it cannot resolve against)."""
    if name in bin_protocols(config, ds):
        spec = config["datasets"][ds]
        out: dict[str, Any] = {"format": "insightface_bin", "path": spec["path"],
                               "layout": bin_layout(spec)}
        block = bin_block(spec, name)
        if block is not None:
            out["block"] = block
        return out
    if name in imports(config) and _import_applies(config, name, ds):
        return dict(imports(config)[name])
    raise ValueError(f"protocol {name!r} does not apply to dataset {ds!r} (an import of "
                     "another dataset's files, or a .bin protocol of another dataset); "
                     "nothing asks for it unless a stage names it: check evaluate.benchmarks "
                     "and the protocols lists of later stages")


def import_regex(config: Mapping[str, Any]) -> str:
    """The ``{proto}`` wildcard constraint of rule ``import_protocol``: the imports and the
    protocols ``layout: pairs`` ``.bin`` datasets imply (CC11 blocks: rule
    ``cc11_protocols``)."""
    stems = [p for ds in config.get("datasets", {}) or {} if ds not in cc11_datasets(config)
             for p in bin_protocols(config, ds)]
    return name_regex(dict.fromkeys([*imports(config), *stems]))


def cc11_datasets(config: Mapping[str, Any]) -> list[str]:
    """The ``layout: cc11`` ``.bin`` datasets (rule ``cc11_protocols`` writes their eleven
    block protocols in one job)."""
    return [ds for ds, spec in (config.get("datasets", {}) or {}).items()
            if is_bin_dataset(config, ds) and bin_layout(spec) == "cc11"]


def cc11_regex(config: Mapping[str, Any]) -> str:
    """The ``{ds}`` wildcard constraint of rule ``cc11_protocols``."""
    return name_regex(cc11_datasets(config))


def protocol_regex(config: Mapping[str, Any]) -> str:
    """The ``{bench}`` wildcard constraint of rule ``evaluate_benchmark``: the mined
    benchmarks, ``lfw``, the imports and the ``.bin`` protocols."""
    return name_regex(dict.fromkeys([*benchmark_names(config), "lfw", *imports(config),
                                     *all_bin_protocols(config), *all_set_protocols(config)]))


def eval_models(config: Mapping[str, Any]) -> list[str]:
    """Embed models to evaluate: ``evaluate.models``, or every configured embed model."""
    return list((config.get("evaluate", {}) or {}).get("models", []) or []) or \
        embed_models(config)


def eval_benchmarks(config: Mapping[str, Any], ds: str) -> list[str]:
    """Protocols evaluated on ``ds``: ``evaluate.benchmarks``, or the ``.bin`` protocols
    ``ds`` implies + mined + ``lfw`` + imports.

    Listed names that do not apply to ``ds`` (``lfw`` without a pairs file, an import
    restricted to other datasets, another dataset's ``.bin`` protocol) are skipped.
    """
    has_lfw = bool(config["datasets"][ds].get("pairs"))
    benches, imps = benchmark_names(config), imports(config)
    implied = implied_protocols(config, ds)
    listed = (config.get("evaluate", {}) or {}).get("benchmarks", []) or []
    if listed:
        return [b for b in listed if b in implied
                or (b in benches and not is_bin_dataset(config, ds))
                or (b == "lfw" and has_lfw)
                or (b in imps and _import_applies(config, b, ds))]
    out = list(implied)
    if reference_model(config) and not is_bin_dataset(config, ds):
        out += list(benches)
    if has_lfw:
        out.append("lfw")
    return list(dict.fromkeys(out + [n for n in imps if _import_applies(config, n, ds)]))


def evaluated_protocols(config: Mapping[str, Any]) -> list[str]:
    """Every protocol evaluated on some dataset (``evaluate.benchmarks``, else the mined
    benchmarks, ``lfw`` and imports that apply), in order: what later stages assess when
    their own ``protocols`` list is empty."""
    listed = [str(b) for b in (config.get("evaluate", {}) or {}).get("benchmarks", []) or []]
    if listed:
        return listed
    out: list[str] = []
    for ds in config.get("datasets", {}) or {}:
        single = rfw_sets_of(config, ds)  # RFW's sets: assessed together, as rfw
        out += [b for b in eval_benchmarks(config, ds) if b not in out and b not in single]
    return out


def protocol_path(config: Mapping[str, Any], ds: str, bench: str) -> str:
    """The pair protocol Parquet of benchmark ``bench`` on ``ds``."""
    if bench in bin_protocols(config, ds):
        return f"results/{ds}/protocols/{bench}.parquet"
    if bench in benchmark_names(config):
        return f"results/{ds}/benchmarks/{bench}/pairs.parquet"
    if bench == "lfw":
        return f"results/{ds}/protocols/pairs.parquet"
    return f"results/{ds}/protocols/{bench}.parquet"


def models_on(config: Mapping[str, Any], ds: str, bench: str) -> list[str]:
    """The models evaluated on protocol ``bench`` of ``ds``: the embed models (none on a
    BFW dataset read without images), then the score models of a BFW dataset's protocol."""
    own = [] if score_only(config, ds) else eval_models(config)
    return own + [m for m in score_models(config, ds)
                  if score_model_applies(config, ds, m, bench) and m not in own]


def model_applies(config: Mapping[str, Any], ds: str, model: str, protocol: str) -> bool:
    """Whether scored pairs of ``model`` exist on (``ds``, ``protocol``): a BFW score model
    on its dataset's protocol ``bfw`` only; an embed model wherever images are read (not
    on a BFW dataset read without images)."""
    if model in score_models(config):
        return score_model_applies(config, ds, model, protocol)
    return not score_only(config, ds)


def summary_models(config: Mapping[str, Any], ds: str) -> list[str]:
    """The rows of ``ds``'s summary: every model evaluated on some protocol of ``ds``."""
    out: list[str] = []
    for b in eval_benchmarks(config, ds):
        out += [m for m in models_on(config, ds, b) if m not in out]
    return out


def metric_files(config: Mapping[str, Any], ds: str) -> list[str]:
    """Every per-(model, benchmark) metrics file the summary of ``ds`` reads."""
    return [f"results/{ds}/eval/{m}/{b}/metrics.parquet"
            for b in eval_benchmarks(config, ds) for m in models_on(config, ds, b)]


def evaluate_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """Default evaluation outputs of ``ds`` (the summary pulls in every benchmark)."""
    if not metric_files(config, ds):
        return []
    return [f"results/{ds}/eval/summary.md", f"results/{ds}/eval/summary.html"]


def _bin_set_name(config: Mapping[str, Any], ds: str, protocol: str) -> str:
    """The suite column of ``protocol`` on ``.bin`` dataset ``ds``: the protocol's name, or
    for a CC11 block the file stem (``cc11``, ``cc11_val``)."""
    spec = config["datasets"][ds]
    if _cc11_block(config, ds, protocol):
        return Path(str(spec.get("path", ""))).stem
    return protocol


def _cc11_block(config: Mapping[str, Any], ds: str, protocol: str) -> bool:
    """Whether ``protocol`` is a CC11 block of ``ds`` (its suite figure is the CC11 average;
    a ``layout: blocks`` block is a set of its own)."""
    spec = config["datasets"][ds]
    return (bin_layout(spec) == "cc11" and protocol in bin_protocols(config, ds)
            and bin_block(spec, protocol) is not None)


def bin_suite_items(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every (model, protocol) of the ``.bin`` datasets, as rule ``bin_suite`` reads them:
    ``set`` (the suite column; a name two datasets share gets `` (<ds>)``), ``dataset``,
    ``protocol``, ``block`` (the CC11 block, '' otherwise), ``model``, ``path``."""
    raw = [(ds, p, _bin_set_name(config, ds, p)) for ds in config.get("datasets", {}) or {}
           if is_bin_dataset(config, ds) for p in eval_benchmarks(config, ds)]
    owners: dict[str, set[str]] = {}
    for ds, _, s in raw:
        owners.setdefault(s, set()).add(ds)
    out = []
    for ds, p, s in raw:
        block = p if _cc11_block(config, ds, p) else ""
        name = s if len(owners[s]) == 1 else f"{s} ({ds})"
        out += [{"set": name, "dataset": ds, "protocol": p, "block": block, "model": m,
                 "path": f"results/{ds}/eval/{m}/{p}/metrics.parquet"}
                for m in eval_models(config)]
    return out


def bin_suite_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """``results/bin_suite.md`` / ``.html``, asked for once (by the first ``.bin`` dataset)
    when some model is evaluated on some ``.bin`` set."""
    items = bin_suite_items(config)
    if not items or items[0]["dataset"] != ds:
        return []
    return ["results/bin_suite.md", "results/bin_suite.html"]


def cc11_items(config: Mapping[str, Any], ds: str) -> list[dict[str, Any]]:
    """The (model, CC11 block) metrics rule ``cc11_table`` of ``ds`` reads ([] unless
    ``ds`` is a ``layout: cc11`` dataset with an evaluated block)."""
    return [it for it in bin_suite_items(config) if it["dataset"] == ds and it["block"]]


def cc11_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """``results/<ds>/eval/cc11.md`` / ``.html`` for a ``layout: cc11`` dataset."""
    return ([f"results/{ds}/eval/cc11.md", f"results/{ds}/eval/cc11.html"]
            if cc11_items(config, ds) else [])


def model_flips(config: Mapping[str, Any]) -> dict[str, bool]:
    """Whether each evaluated model sums the embeddings of the crop and its mirror image
    (``embed.models.<m>.flip``), as arcface_torch's Accuracy-Flip does."""
    models = (config.get("embed", {}) or {}).get("models", {}) or {}
    return {m: bool((models.get(m) or {}).get("flip", False)) for m in eval_models(config)}


# ------------------------------------------------------------------ RFW and BFW


def set_dataset_regex(config: Mapping[str, Any]) -> str:
    """The ``{ds}`` constraint of rule ``set_protocol``: the RFW and BFW datasets."""
    return name_regex(set_datasets(config))


def set_protocol_regex(config: Mapping[str, Any]) -> str:
    """The ``{proto}`` constraint of rule ``set_protocol``: RFW's sets, ``rfw``, ``bfw``."""
    return name_regex(all_set_protocols(config))


def score_model_regex(config: Mapping[str, Any]) -> str:
    """The ``{model}`` constraint of rule ``evaluate_scores``: BFW's score models."""
    return name_regex(score_models(config))


def rfw_items(config: Mapping[str, Any], ds: str) -> list[dict[str, str]]:
    """The (model, set) metrics rule ``rfw_table`` of ``ds`` reads ([] unless ``ds`` is an
    RFW dataset with an evaluated set)."""
    sets = rfw_sets_of(config, ds)
    here = eval_benchmarks(config, ds) if sets else []
    return [{"model": m, "set": s, "path": f"results/{ds}/eval/{m}/{s}/metrics.parquet"}
            for s in sets if s in here for m in models_on(config, ds, s)]


def rfw_sets_of(config: Mapping[str, Any], ds: str) -> list[str]:
    """The sets of RFW dataset ``ds``, the columns of its table ([] for another kind)."""
    if kind_of(config, ds) != "rfw":
        return []
    return [s for s in set_protocols(config, ds) if s != RFW_ALL]


def rfw_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """``results/<ds>/eval/rfw.md`` / ``.html`` for an RFW dataset."""
    return ([f"results/{ds}/eval/rfw.md", f"results/{ds}/eval/rfw.html"]
            if rfw_items(config, ds) else [])
