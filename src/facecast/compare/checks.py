"""Config checks of the compare section; each message names its key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.compare.targets import enabled, skip_reason
from facecast.config.util import name_list, section
from facecast.slices.targets import split_model


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """The plan line of the compare section when it is off or skipped."""
    if not enabled(config):
        return ["compare: off (compare.enabled: false)"]
    if why := skip_reason(config):
        return [f"compare: skipped - {why}"]
    return []


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Unknown models or benchmarks named in ``compare``."""
    errs: list[str] = []
    c = section(config, "compare")
    if not c or not c.get("enabled", True):
        return errs
    embed = set(name_list(section(config, "embed").get("models")))
    for m in name_list(c.get("models")):  # `dlib+fsn`: its method is checked by mitigation
        if embed and split_model(m)[0] not in embed:
            errs.append(f"compare.models: {m!r} is not an embed model "
                        f"(embed.models: {sorted(embed)})")
    benches = set(name_list(config.get("benchmarks"))) | {"lfw"} | set(
        name_list(section(config, "evaluate").get("imports")))
    for b in name_list(c.get("benchmarks")):
        if b not in benches:
            errs.append(f"compare.benchmarks: {b!r} is not a benchmark, lfw or an evaluate "
                        f"import ({sorted(benches)})")
    return errs
