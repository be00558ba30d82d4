"""What rule ``slices`` and ``facecast slices`` call: the hard sub-benchmarks of one model
on one protocol (analysis: :func:`facecast.slices.discover.find_slices`).

Writes into ``results/{ds}/slices/{model}/{protocol}/`` (or the CLI's ``--out``):

==================  ===================================================================
``slices.parquet``  every slice of the family (support >= the minimum): definition in
``slices.csv``      words and as filters, supports, errors with bootstrap intervals,
                    effect, p, q, ``significant``, ``redundant``, rank
``discovered.yaml`` the top-k significant, non-redundant slices as facecast benchmark
                    definitions (``benchmarks: {name: {filters: [...]}}``)
``search.json``     the threshold, the error type, counts (evaluated, pruned, tested,
                    significant), the columns searched
``report.html``     the top slices; ``slices.png`` (error rates with intervals) and
``examples.png``    the hardest errors of the top slices
==================  ===================================================================
"""

from __future__ import annotations

import json
import logging
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml

from facecast.analysis.filtering import DEFAULT_STATUSES
from facecast.fairness.hardpairs import hard_pairs_grid, hardest_pairs, load_tiles
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, write_html_page
from facecast.slices.discover import find_slices, slice_members

log = logging.getLogger(__name__)

#: columns of slices.parquet shown in the report table
SHOWN = ["rank", "slice", "n_genuine", "n_impostor", "n_identities", "error_rate", "error_lo",
         "error_hi", "rest_rate", "effect", "p", "q", "fnmr", "fmr", "accuracy", "note"]


def read_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """Scored pairs: ``image_a``, ``image_b``, ``label``, ``score`` and optionally
    ``identity_a``/``identity_b`` (absent: each image is its own identity, so the tests
    fall back to image-clustered resampling); ids as text."""
    pairs = read_parquet(path)
    need = ["image_a", "image_b", "label", "score"]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing}; scored pairs need {need} "
                         "(and optionally identity_a, identity_b)")
    for side in ("a", "b"):
        if f"identity_{side}" not in pairs.columns:
            log.warning("%s has no identity_%s: resampling treats each image as its own "
                        "identity (dependence between images of one person is ignored)",
                        path, side)
            pairs[f"identity_{side}"] = pairs[f"image_{side}"]
    for c in ("image_a", "image_b", "identity_a", "identity_b"):
        pairs[c] = pairs[c].astype(str)
    return pairs


def read_attributes(path: str | os.PathLike, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """The attribute table (``image_id`` + columns); only the columns the search reads."""
    from facecast.slices.predicates import NOT_ATTRIBUTES, select_columns

    names = pq.read_schema(path).names
    if "image_id" not in names:
        raise ValueError(f"{path} has no image_id column")
    cols = select_columns([c for c in names if c not in NOT_ATTRIBUTES], cfg)
    keep = ["image_id", *[c for c in ("status", "exclude") if c in names], *cols]
    return read_parquet(path, columns=keep)


def _bench_name(model: str, protocol: str, rank: int) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", f"slice_{model}_{protocol}_{rank}")


def discovered_yaml(table: pd.DataFrame, *, model: str, protocol: str, top_k: int,
                    info: Mapping[str, Any]) -> str:
    """The top-k ranked slices as a facecast config fragment (``benchmarks:``)."""
    top = table[table["rank"].notna()].sort_values("rank").head(top_k)
    thr = info["threshold"]
    head = [f"# Hard sub-benchmarks discovered by facecast slices: {model} on {protocol}",
            f"# {info['error_type']} at one threshold ({thr['policy']}"
            + (f" {thr['value']:g}" if thr["policy"] == "fmr" else "")
            + f", t = {thr['threshold']:.6g}); {info['fdr_method'].upper()} FDR "
            f"{info['fdr']:g} over {info['family']} slices, {info['significant']} significant.",
            "# Add to a run: snakemake --configfile <your config> <this file>",
            "# (rank filters rank over the benchmark pool, as the search did)."]
    benches: dict[str, Any] = {}
    for row in top.itertuples(index=False):
        benches[_bench_name(model, protocol, int(row.rank))] = {
            "filters": json.loads(row.definition)}
        head.append(f"#  {_bench_name(model, protocol, int(row.rank))}: {row.slice}: "
                    f"{info['error_type']} {row.error_rate:.4g} "
                    f"[{row.error_lo:.4g}, {row.error_hi:.4g}] vs {row.rest_rate:.4g}, "
                    f"q = {row.q:.3g}")
    body = yaml.safe_dump({"benchmarks": benches}, sort_keys=False) if benches else \
        "benchmarks: {}\n"
    return "\n".join(head) + "\n" + body


def plot_slices(table: pd.DataFrame, info: Mapping[str, Any], path: str | os.PathLike,
                title: str, top: int) -> None:
    """Error rate of the top slices (ranked, else the lowest p) with bootstrap intervals,
    the rest's rate beside each, the overall rate as a line."""
    shown = table[table["rank"].notna()].head(top)
    if shown.empty:
        shown = table[table["tested"]].sort_values("p", kind="stable").head(top)
    fig, ax = pyplot().subplots(figsize=(9, 1.2 + 0.5 * max(1, len(shown))),
                                constrained_layout=True)
    y = np.arange(len(shown))[::-1]
    if len(shown):
        r = shown["error_rate"].to_numpy()
        lo = np.nan_to_num(r - shown["error_lo"].to_numpy(), nan=0.0).clip(0)
        hi = np.nan_to_num(shown["error_hi"].to_numpy() - r, nan=0.0).clip(0)
        colours = ["tab:red" if s else "tab:grey" for s in shown["significant"]]
        for k in range(len(shown)):
            ax.errorbar(r[k], y[k], xerr=[[lo[k]], [hi[k]]], fmt="o", color=colours[k],
                        capsize=3, label="slice (identity bootstrap)" if k == 0 else None)
        ax.scatter(shown["rest_rate"], y, marker="|", s=120, c="black", label="rest")
        ax.set_yticks(y, ["\n".join(textwrap.wrap(s, 60)) for s in shown["slice"]],
                      fontsize=7)
    else:
        ax.text(0.5, 0.5, "no slice tested", ha="center", transform=ax.transAxes)
    ax.axvline(info["mean_error"], color="tab:blue", ls="--", lw=1, label="all pairs")
    ax.set_xlabel(f"{info['error_type'].upper()} at t = {info['threshold']['threshold']:.4g}")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    save_figure(fig, path)


def example_pairs(table: pd.DataFrame, pairs: pd.DataFrame, masks: np.ndarray,
                  info: Mapping[str, Any], *, slices: int = 4, per_slice: int = 2
                  ) -> pd.DataFrame:
    """The hardest errors of the relevant kind in each of the top ``slices`` slices."""
    shown = table[table["rank"].notna()].head(slices)
    if shown.empty:
        shown = table[table["tested"]].sort_values("p", kind="stable").head(slices)
    kind = "genuine" if info["error_type"] == "fnmr" else "impostor"
    out = []
    valid = pairs.assign(score=pd.to_numeric(pairs["score"], errors="coerce"))
    ok = np.isfinite(valid["score"].to_numpy(np.float64)) & valid["label"].isin([0, 1])
    valid = valid.loc[ok].reset_index(drop=True)
    for i, row in enumerate(shown.itertuples(index=False), 1):
        member = slice_members(masks, row.pred_ids, info["ia"], info["ib"])
        hard = hardest_pairs(valid.loc[member], per_slice)
        hard = hard[hard["kind"] == kind].assign(
            group=f"slice {int(row.rank) if pd.notna(row.rank) else i}", slice=row.slice)
        out.append(hard)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["kind", "rank", "image_a", "image_b", "label", "score", "group", "slice"])


def write_slices(table: pd.DataFrame, info: dict[str, Any], pairs: pd.DataFrame,
                 masks: np.ndarray, out_dir: str | os.PathLike, cfg: Mapping[str, Any], *,
                 model: str, protocol: str, faces_paths: Sequence[str] = (),
                 provenance: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Every output file of one search (see the module docstring); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "slices", "model": model,
            "protocol": protocol}
    public = table.drop(columns=["pred_ids"]).assign(
        definition=[json.dumps(d) for d in table["definition"]])
    paths = {"parquet": out / "slices.parquet", "csv": out / "slices.csv",
             "yaml": out / "discovered.yaml", "json": out / "search.json",
             "html": out / "report.html", "png": out / "slices.png",
             "examples": out / "examples.png"}
    write_parquet(public, paths["parquet"], provenance=prov)
    write_text(paths["csv"], public.to_csv(index=False))
    summary = {k: v for k, v in info.items() if k not in ("ia", "ib")}
    write_text(paths["json"], json.dumps(summary, indent=1, sort_keys=True, default=float)
               + "\n")
    write_text(paths["yaml"], discovered_yaml(public, model=model, protocol=protocol,
                                              top_k=int(cfg.get("top_k", 5)), info=info))
    top = int(cfg.get("report_top", 10))
    title = f"{model} on {protocol}: slices where it errs most"
    plot_slices(table, info, paths["png"], title, top)
    examples = example_pairs(table, pairs, masks, info)
    tiles = load_tiles(list(examples["image_a"]) + list(examples["image_b"]), faces_paths)
    hard_pairs_grid(examples, tiles, paths["examples"])
    thr = info["threshold"]
    lines = [f"<p>{info['error_type'].upper()} of each slice's "
             f"{'genuine' if info['error_type'] == 'fnmr' else 'impostor'} pairs at one "
             f"threshold fixed on all {info['n_pairs']} pairs ({thr['policy']}"
             + (f" {thr['value']:g}" if thr["policy"] == "fmr" else "")
             + f": t = {thr['threshold']:.6g}, FNMR {thr['fnmr']:.4g}, FMR {thr['fmr']:.4g}"
             + ("" if thr["resolvable"] else "; NOT resolvable: too few impostor pairs")
             + "). A pair is in a slice when both images satisfy it. "
             f"{info['evaluated']} slices evaluated, {info['pruned']} pruned (SliceLine "
             f"bounds), {info['family']} with enough support, {info['tested']} tested "
             "(identity-clustered bootstrap, one-sided: the slice is worse), "
             f"{info['fdr_method'].upper()} at FDR {info['fdr']:g}: "
             f"<b>{info['significant']} significant</b>. Redundant slices (no worse than "
             "a significant parent) are not ranked.</p>"]
    ranked = public[public["rank"].notna()].head(top)
    if ranked.empty:
        lines.append("<p><b>No significant slice</b>: the lowest p-values follow.</p>")
        ranked = public[public["tested"]].sort_values("p", kind="stable").head(top)
    lines.append(frame_html(ranked[[c for c in SHOWN if c in ranked.columns]],
                            caption="top slices"))
    if len(examples):
        lines.append(frame_html(examples[["group", "slice", "image_a", "image_b", "score"]],
                                caption="hardest errors in the top slices (examples.png)"))
    write_html_page(paths["html"], title, lines)
    return paths


def run_slices(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
               out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, model: str,
               protocol: str, seed: int, statuses: Sequence[str] = DEFAULT_STATUSES,
               faces_paths: Sequence[str] = (),
               provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Search one model's scored pairs and write every output; returns the table."""
    pairs = read_pairs(scores_path)
    attrs = read_attributes(attributes_path, cfg)
    table, info, _, masks = find_slices(pairs, attrs, cfg, seed=seed,
                                        statuses=tuple(statuses))
    thr = info["threshold"]
    if not thr["resolvable"]:
        log.warning("slices.threshold: FMR %g needs >= %d impostor pairs, the protocol has "
                    "%d: the threshold sits beyond every impostor score", thr["value"],
                    int(np.ceil(1 / thr["value"])), thr["n_impostor"])
    log.info("%s on %s: %d predicates over %d columns, %d slices evaluated, %d pruned, "
             "%d in the family, %d tested, %d significant", model, protocol,
             info["n_predicates"], len(info["columns"]), info["evaluated"], info["pruned"],
             info["family"], info["tested"], info["significant"])
    write_slices(table, info, pairs, masks, out_dir, cfg, model=model, protocol=protocol,
                 faces_paths=faces_paths, provenance=provenance)
    return table
