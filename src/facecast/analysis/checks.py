"""Config checks of the analysis stage (correlations, CAST filtering, pair mining), run
before any job: the reference model exists, mining bands and filter bounds are ordered and
in range, every column a filter or ``correlations.columns`` names will be in
``attributes.parquet`` (:mod:`facecast.config.columns`), and ``analysis.level: template``
has an IJB dataset to work on.

:func:`fill_defaults`: a config without a ``benchmarks`` section (and no other protocol: no
LFW pairs file, no import, no ``insightface_bin`` dataset) gets one,
:data:`DEFAULT_BENCHMARK` - the exhaustive protocol of the whole pool (every genuine pair,
a seeded sample of impostor pairs) - so a folder of photos and one embedder is evaluated. ``benchmarks: {}`` asks for none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facecast.config.columns import check_references
from facecast.config.util import (
    attribute_only,
    datasets_of,
    embed_model_names,
    listing,
    name_list,
    section,
)

QUANTILE_MODES = ("impostor_quantile", "genuine_quantile")
#: the benchmark a config without ``benchmarks`` gets
DEFAULT_BENCHMARK_NAME = "all_pairs"
DEFAULT_BENCHMARK = {"filters": [], "mining": {"mode": "all", "n_impostor": 200_000}}


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Add :data:`DEFAULT_BENCHMARK` when ``benchmarks`` was left out and nothing else
    gives a protocol; return the plan line."""
    if "benchmarks" not in absent or config.get("benchmarks"):
        return []
    has_pairs = any(spec.get("pairs") or spec.get("kind") in ("insightface_bin", "rfw", "bfw")
                    for spec in datasets_of(config).values())  # these imply their pairs
    if has_pairs or section(section(config, "evaluate"), "imports"):
        return []
    if all(attribute_only(config, ds) for ds in datasets_of(config)):
        return []  # attribute benchmarks only (fairface, utkface): no pairs to mine
    config["benchmarks"] = {DEFAULT_BENCHMARK_NAME: {
        "filters": [], "mining": dict(DEFAULT_BENCHMARK["mining"])}}
    n_imp = DEFAULT_BENCHMARK["mining"]["n_impostor"]
    return [f"benchmarks: derived - {DEFAULT_BENCHMARK_NAME}: every genuine pair of the pool "
            f"and a seeded sample of {n_imp:,} impostor pairs (mining mode all; a val fold of "
            "them is held out of the 10-fold test, counted on the summary page), because "
            "the config has no benchmarks; write your own benchmarks, or benchmarks: {} for "
            "none"]


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


def range_errors(config: Mapping[str, Any]) -> list[str]:
    """Mining bands (global and per benchmark) and filter bounds."""
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
    return errors


def column_references(config: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """``(key path, column, datasets)`` of every column a filter or correlations names."""
    all_ds = list(datasets_of(config))
    refs: list[tuple[str, str, list[str]]] = []
    for bench, bcfg in section(config, "benchmarks").items():
        for i, f in enumerate((bcfg or {}).get("filters") or []):
            if isinstance(f, Mapping) and "attribute" in f:
                refs.append((f"benchmarks.{bench}.filters[{i}].attribute", str(f["attribute"]),
                             all_ds))
        for i, t in enumerate((bcfg or {}).get("cast_filters") or []):
            if isinstance(t, (list, tuple)) and t:
                refs.append((f"benchmarks.{bench}.cast_filters[{i}]", str(t[0]), all_ds))
    for name, cfg in section(section(config, "export"), "train_subsets").items():
        if isinstance(cfg, Mapping) and cfg.get("balance_by"):
            refs.append((f"export.train_subsets.{name}.balance_by", str(cfg["balance_by"]),
                         all_ds))
    for i, c in enumerate(name_list(section(config, "correlations").get("columns"))):
        refs.append((f"correlations.columns[{i}]", c, all_ds))
    return refs


def cast_filter_errors(config: Mapping[str, Any]) -> list[str]:
    """CAST tuples that are not ``[attribute, class]`` / ``[attribute, rank | abs, lo, hi]``
    with ordered bounds (rank: percents 0-100)."""
    from facecast.analysis.cast_tuples import parse_cast_filter
    from facecast.analysis.filtering import FilterError

    errors: list[str] = []
    for bench, bcfg in section(config, "benchmarks").items():
        bcfg = bcfg or {}
        for i, t in enumerate(bcfg.get("cast_filters") or []):
            try:
                parse_cast_filter(t, bench, i)
            except FilterError as exc:
                errors.append(str(exc))
    return errors


def cast_nan_errors(config: Mapping[str, Any]) -> list[str]:
    """``cast_nan: drop`` without a ``cast_arrays`` dataset: it would change nothing (only
    that kind's manifest marks rows with a NaN cell, status ``nan_attribute``; attribute
    tables keep such rows and each filter decides on its own column)."""
    if any(spec.get("kind") == "cast_arrays" for spec in datasets_of(config).values()):
        return []
    return [f"benchmarks.{bench}.cast_nan: drop applies to cast_arrays datasets only (rows "
            "with a NaN attribute cell, status nan_attribute); no dataset here is one, so it "
            "would change nothing - remove it"
            for bench, bcfg in section(config, "benchmarks").items()
            if str((bcfg or {}).get("cast_nan", "cast")) == "drop"]


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """The analysis stage's checks."""
    from facecast.analysis.bin_checks import bin_export_errors

    errors: list[str] = (cast_filter_errors(config) + cast_nan_errors(config)
                         + train_subset_errors(config) + level_errors(config)
                         + bin_export_errors(config))
    models = embed_model_names(config)
    ref = str(section(config, "mining").get("reference_model") or "")
    if ref and ref not in models:
        errors.append(f"mining.reference_model: unknown embed model {ref!r}; known: "
                      f"{listing(models)}")
    return errors + range_errors(config) + check_references(config, column_references(config))


def train_subset_errors(config: Mapping[str, Any]) -> list[str]:
    """``export.train_subsets``: the benchmark exists, image copies need readable images (a
    ``cast_arrays`` dataset needs ``root``); ``balance_by`` is checked with the other column
    references (:func:`column_references`)."""
    errors: list[str] = []
    subsets = section(section(config, "export"), "train_subsets")
    benches = list(section(config, "benchmarks"))
    datasets = datasets_of(config)
    for name, cfg in subsets.items():
        key = f"export.train_subsets.{name}"
        cfg = cfg or {}
        if cfg.get("benchmark") not in benches:
            errors.append(f"{key}.benchmark: {cfg.get('benchmark')!r} is not a benchmark; "
                          f"known: {listing(benches)}")
        if cfg.get("format", "recordio") in ("recordio", "folder"):
            for ds, spec in datasets.items():
                if spec.get("kind") == "cast_arrays" and not spec.get("root"):
                    errors.append(f"{key}.format: {cfg.get('format', 'recordio')} copies the "
                                  f"images, but cast_arrays dataset {ds} has no root "
                                  f"(datasets.{ds}.root: the WebFace42M folder); or use "
                                  "format: list")
    return errors


def level_errors(config: Mapping[str, Any]) -> list[str]:
    """``analysis.level: template`` needs a dataset whose templates are known (kind
    ``ijb``); without one it would change nothing."""
    if str(section(config, "analysis").get("level", "image")) != "template":
        return []
    if any(spec.get("kind") == "ijb" for spec in datasets_of(config).values()):
        return []
    return ["analysis.level: template analyses the templates of IJB datasets, but no "
            "dataset has kind ijb; use level: image (the default) or add the IJB release "
            "(datasets.<name>: {kind: ijb, root: ..., variant: ijbc})"]
