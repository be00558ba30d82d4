"""File lists for workflow/rules/attributes.smk (kept here so the .smk holds only rules)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from facecast.attributes.stage import active_scorers

SCORER_REGEX = "native|pyiqa|age_gender|fairface|celeba40"


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


def score_inputs(config: Mapping[str, Any], ds: str, scorer: str, shard: str) -> dict[str, str]:
    """Inputs of one attributes_score job: faces shard (+ embed shards, + head checkpoint)."""
    out = {"faces": f"results/{ds}/faces/{shard}.parquet"}
    if scorer == "native" and _cfg(config).get("embed_norms", True):
        for model in embed_models(config):
            out[f"embed_{model}"] = f"results/{ds}/embed/{model}/{shard}.parquet"
    if scorer == "celeba40":
        out["weights"] = head_weights(config, ds, scorer)
    return out


def merge_inputs(config: Mapping[str, Any], ds: str,
                 per_shard: Callable[..., list[str]]) -> dict[str, Any]:
    """Inputs of attributes_merge: manifest, faces shards, every active scorer's shards."""
    out: dict[str, Any] = {"manifest": f"results/{ds}/manifest.parquet",
                           "faces": per_shard("results/{ds}/faces/{shard}.parquet", ds)}
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
