"""Small helpers shared by the parse-time config checks (:mod:`facecast.config_check`).

Nothing here imports torch: constants of model modules are read from their source
(:func:`module_constant`), backend options from the constructors' source
(:func:`constructor_options`).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

#: a celeba40 checkpoint path that the attribute_model rule builds in this run
TRAINED_CHECKPOINT_RE = re.compile(r"^(\./)?results/[^/]+/attribute_model/checkpoint\.pt$")
#: constructor parameters that are not user options of an embedding backend
_NOT_OPTIONS = {"self", "name", "device", "amp", "threads"}

_WARNINGS: list[str] = []


def warn(message: str) -> None:
    """Record a warning of the current check run (printed by :func:`facecast.config_check.check_config`)."""
    if message not in _WARNINGS:
        _WARNINGS.append(message)


# ----------------------------------------------------------------------------- helpers


def section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def name_list(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [str(k) for k in value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def listing(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names) if names else "(none)"


@cache
def _module_tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise ImportError(f"cannot find module {module}")
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


@cache
def module_constant(module: str, name: str) -> Any:
    """The literal value of module-level constant ``name`` of ``module``, read from its
    source without importing it (so parsing the Snakefile never imports torch)."""
    for node in _module_tree(module).body:
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        else:
            continue
        if name in targets and node.value is not None:
            return ast.literal_eval(node.value)
    raise KeyError(f"{module} has no literal constant {name}")


@cache
def constructor_options(module: str, cls: str) -> tuple[list[str], list[str]]:
    """(all options, options without a default) of ``cls.__init__`` in ``module``, read
    from the source; ``self``/``name``/``device``/``amp``/``threads`` and ``**kwargs``
    are not options."""
    for node in _module_tree(module).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    a = item.args
                    pos = a.posonlyargs + a.args
                    n_required = len(pos) - len(a.defaults)
                    required = [p.arg for p in pos[:n_required]]
                    required += [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults,
                                                       strict=True) if d is None]
                    every = [p.arg for p in pos + a.kwonlyargs]
                    return ([p for p in every if p not in _NOT_OPTIONS],
                            [p for p in required if p not in _NOT_OPTIONS])
    raise KeyError(f"{module} has no class {cls} with an __init__")


def backend_options(backend: str) -> tuple[set[str], set[str]]:
    """(allowed model keys, required model keys) of an embedding backend."""
    from facecast.embed.registry import BACKENDS, FITTED_BACKENDS, NON_OPTIONS

    module, cls = BACKENDS[backend]
    options, required = constructor_options(module, cls)
    allowed = {"backend", *options}
    if backend in FITTED_BACKENDS:
        allowed |= set(NON_OPTIONS)
        required = [r for r in required if r != "weights"]  # the pipeline's fit
    return allowed, set(required)


def torch_home() -> Path:
    """``$TORCH_HOME``, else ``$XDG_CACHE_HOME/torch``, else ``~/.cache/torch`` (torch's rule)."""
    default = os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")
    return Path(os.path.expanduser(os.getenv("TORCH_HOME", default)))


def hf_hub_cache() -> Path:
    if os.getenv("HF_HUB_CACHE"):
        return Path(os.path.expanduser(os.environ["HF_HUB_CACHE"]))
    home = os.getenv("HF_HOME") or os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"),
                                                "huggingface")
    return Path(os.path.expanduser(home)) / "hub"


def package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def datasets_of(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(k): (v if isinstance(v, Mapping) else {})
            for k, v in section(config, "datasets").items()}


def fairness_enabled(config: Mapping[str, Any]) -> bool:
    """``fairness.enabled`` (default true)."""
    return bool(section(config, "fairness").get("enabled", True))


def active_scorers_of(config: Mapping[str, Any], errors: list[str]) -> list[str]:
    from facecast.attributes.targets import active_scorers

    try:
        return active_scorers(section(config, "attributes"))
    except ValueError as exc:
        errors.append(str(exc))
        return [s for s in name_list(section(config, "attributes").get("scorers"))
                if s != "pyiqa"]


def celeba40_trained(config: Mapping[str, Any]) -> bool:
    weights = str(section(section(config, "attributes"), "celeba40").get("weights") or "")
    return not weights or bool(TRAINED_CHECKPOINT_RE.match(weights))
