"""Small helpers shared by the parse-time config checks (:mod:`facecast.config.check`) and
the stages' own ``checks`` modules.

Nothing here imports torch or a stage: constants of model modules are read from their
source (:func:`module_constant`), constructor options from the source too
(:func:`constructor_options`).
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

#: constructor parameters that are not user options of an embedding backend
_NOT_OPTIONS = {"self", "name", "device", "amp", "threads"}

_WARNINGS: list[str] = []
_NOTES: list[str] = []


def warn(message: str) -> None:
    """Record a warning of the current check run (printed by :func:`facecast.config.check.check_config`)."""
    if message not in _WARNINGS:
        _WARNINGS.append(message)


def note(message: str) -> None:
    """Record a note that explains errors of the current run (e.g. one dataset's known
    columns); printed once after the error list, however many errors refer to it."""
    if message not in _NOTES:
        _NOTES.append(message)


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


#: dataset kinds of images without identities, with truth attribute labels (attribute
#: benchmarks): faces, attributes and the estimator report run on them, no verification
ATTRIBUTE_ONLY_KINDS = ("fairface", "utkface")


def attribute_only(config: Mapping[str, Any], ds: str) -> bool:
    """Whether dataset ``ds`` is of a kind in :data:`ATTRIBUTE_ONLY_KINDS`."""
    return datasets_of(config).get(ds, {}).get("kind") in ATTRIBUTE_ONLY_KINDS


def fairness_enabled(config: Mapping[str, Any]) -> bool:
    """``fairness.enabled`` (default true)."""
    return bool(section(config, "fairness").get("enabled", True))


def protocol_names(config: Mapping[str, Any]) -> list[str]:
    """Every protocol an evaluation can be asked for: mined benchmarks, ``lfw`` (when a
    dataset has a pairs file), ``evaluate.imports`` and the protocols ``insightface_bin``
    datasets imply (:mod:`facecast.config.bin_sets`)."""
    from facecast.config.bin_sets import all_bin_protocols
    from facecast.config.fair_sets import all_protocols

    out = name_list(section(config, "benchmarks"))
    if any(spec.get("pairs") for spec in datasets_of(config).values()):
        out.append("lfw")
    out += [n for n in name_list(section(section(config, "evaluate"), "imports"))
            if n not in out]
    out += [n for n in all_bin_protocols(config) if n not in out]
    return out + [n for n in all_protocols(config) if n not in out]


def embed_model_names(config: Mapping[str, Any]) -> list[str]:
    """Names of ``embed.models`` (the schema default's when the section is absent)."""
    return name_list(section(config, "embed").get("models", {"lbp": {}, "dlib": {}}))


def need_file(errors: list[str], key: str, path: Any, what: str = "file") -> None:
    """Append an error naming ``key`` when ``path`` is not a file."""
    p = Path(str(path))
    if not p.is_file():
        errors.append(f"{key}: {what} {str(path)!r} does not exist "
                      f"(looked at {p.absolute()})")
