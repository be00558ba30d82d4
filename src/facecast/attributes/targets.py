"""File lists for workflow/rules/attributes.smk (kept here so the .smk holds only rules).

Imported when the Snakefile is parsed (by every Snakemake process, cluster jobs too), so
it stays free of torch and the scorer modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from facecast.attributes import SCORERS
from facecast.config.util import attribute_only
from facecast.io.shard_index import FACES_INDEX

SCORER_REGEX = "|".join(SCORERS)


def active_scorers(cfg: Mapping[str, Any]) -> list[str]:
    """Scorers that run for config section ``attributes`` (pyiqa joins when metrics are set)."""
    names = list(cfg.get("scorers", ["native", "age_gender"]))
    unknown = [s for s in names if s not in SCORERS]
    if unknown:
        raise ValueError(f"attributes.scorers: unknown scorers {unknown}; known: {list(SCORERS)}")
    metrics = list(cfg.get("pyiqa", {}).get("metrics", []))
    if metrics and "pyiqa" not in names:
        names.append("pyiqa")
    if "pyiqa" in names and not metrics:
        raise ValueError("attributes.scorers lists pyiqa but attributes.pyiqa.metrics is empty")
    return names


def _cfg(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return config.get("attributes", {}) or {}


def embed_models(config: Mapping[str, Any]) -> list[str]:
    """Names of the configured embedders (their norms join the native scorer)."""
    return list((config.get("embed", {}) or {}).get("models", {}) or {})


def head_weights(config: Mapping[str, Any], ds: str, scorer: str) -> str:
    """Checkpoint a head scorer reads ("" when none / the default cache location)."""
    cfg = _cfg(config)
    if scorer == "celeba40":
        return (cfg.get("celeba40", {}).get("weights")
                or f"results/{ds}/attribute_model/checkpoint.pt")
    if scorer == "fairface":
        return cfg.get("fairface", {}).get("weights") or ""
    return ""


#: the real OFIQ's files per manifest shard (attributes.ofiq.models_dir set): the folder
#: of images ofiqpy reads, its map to image ids, and ofiqpy's CSV
OFIQ_INPUTS = "results/{ds}/attributes/ofiq/{shard}.inputs"
OFIQ_MAP = "results/{ds}/attributes/ofiq/{shard}.map.tsv"
OFIQ_CSV = "results/{ds}/attributes/ofiq/{shard}.ofiq.csv"


def ofiq_models_dir(config: Mapping[str, Any]) -> str:
    """``attributes.ofiq.models_dir`` ('' = facecast's own approximation of the ofiq
    components; a folder = the real OFIQ through ofiqpy)."""
    return str((_cfg(config).get("ofiq") or {}).get("models_dir") or "")


def uses_real_ofiq(config: Mapping[str, Any]) -> bool:
    """True when the ofiq scorer runs and runs the real OFIQ."""
    return "ofiq" in active_scorers(_cfg(config)) and bool(ofiq_models_dir(config))


#: the landmark shard of a faces shard (facecast.attributes.landmarks68): dlib's 68 points,
#: shape measurements and pose per row, written by rule attributes_ofiq from the ofiq
#: scorer's own fit; the labels stage's features read it
LANDMARKS = "results/{ds}/attributes/landmarks/{shard}.parquet"


def ofiq_writes_landmarks(config: Mapping[str, Any]) -> bool:
    """True when facecast's own ``ofiq`` scorer runs (not the real OFIQ) and the labels
    stage's ``features`` (``features.enabled``) want the landmarks: then one dlib fit per
    shard serves both, in one job (rule ``attributes_ofiq``) instead of two."""
    return ("ofiq" in active_scorers(_cfg(config)) and not ofiq_models_dir(config)
            and bool((config.get("features") or {}).get("enabled", False)))


def score_regex(config: Mapping[str, Any]) -> str:
    """The scorers rule ``attributes_score`` runs: every scorer but ``ofiq`` where rule
    ``attributes_ofiq`` runs it (:func:`ofiq_writes_landmarks`)."""
    skip = {"ofiq"} if ofiq_writes_landmarks(config) else set()
    return "|".join(s for s in SCORERS if s not in skip)


def score_inputs(config: Mapping[str, Any], ds: str, scorer: str, shard: str) -> dict[str, str]:
    """Inputs of one attributes_score job: faces shard (+ embed shards, not for an
    attribute-only dataset, + head checkpoint, + the real OFIQ's CSV and map)."""
    out = {"faces": f"results/{ds}/faces/{shard}.parquet"}
    if scorer == "ofiq" and ofiq_models_dir(config):
        out["ofiq_csv"] = OFIQ_CSV.format(ds=ds, shard=shard)
        out["ofiq_map"] = OFIQ_MAP.format(ds=ds, shard=shard)
    if (scorer == "native" and _cfg(config).get("embed_norms", True)
            and not attribute_only(config, ds)):  # no embeddings without identities
        for model in embed_models(config):
            out[f"embed_{model}"] = f"results/{ds}/embed/{model}/{shard}.parquet"
    if scorer == "celeba40":
        out["weights"] = head_weights(config, ds, scorer)
    return out


def merge_inputs(config: Mapping[str, Any], ds: str,
                 per_shard: Callable[..., list[str]]) -> dict[str, Any]:
    """Inputs of attributes_merge: manifest, faces index, every active scorer's shards."""
    out: dict[str, Any] = {"manifest": f"results/{ds}/manifest.parquet",
                           "faces": FACES_INDEX.format(ds=ds)}
    for scorer in active_scorers(_cfg(config)):
        out[scorer] = per_shard(f"results/{{ds}}/attributes/{scorer}/{{shard}}.parquet", ds)
    return out


def default_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """The merged table, plus the trained model's evaluation when the trainer is enabled."""
    out = [f"results/{ds}/attributes.parquet"]
    if _cfg(config).get("trainer", {}).get("enabled", False):
        out.append(f"results/{ds}/attribute_model/evaluation.md")
    return out


def uses_gpu(config: Mapping[str, Any]) -> bool:
    """True when the attributes stage is configured for CUDA."""
    return str(_cfg(config).get("device", "auto")).startswith("cuda")
