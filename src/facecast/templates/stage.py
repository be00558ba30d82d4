"""Stage ``templates``: IJB-B / IJB-C template evaluation of one model, and the table of
every model (see docs/stages/templates.md; columns in docs/CONTRACTS.md).

Entries: :func:`run_templates` (rule ``templates_verify``: pool, score the template
pairs, TAR at FAR, ROC), :func:`run_template_identification` (rule
``templates_identify``, with the release's 1:N CSVs), :func:`run_template_groups` (rule
``templates_groups``: FMR / FNMR per demographic group of templates) and
:func:`summarise_templates` (rule ``templates_summary``: all models in one table).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from facecast.datasets.ijb import (
    meta_files,
    read_members,
    read_one_n_csv,
    read_template_pairs,
    template_subjects,
)
from facecast.embed.read import load_embeddings
from facecast.evaluate.failures import FAILED_RULES, decision_scores, rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, write_html_page
from facecast.templates.build import build_templates, settings
from facecast.templates.groups import template_group_rates, template_groups
from facecast.templates.identify import identification_table
from facecast.templates.scoring import score_pairs
from facecast.templates.verify import (
    failure_to_template,
    insightface_roc,
    tar_table,
    thin_roc,
)

log = logging.getLogger("facecast.templates")

PAIR_STATUSES = ("ok", "no_features")


def _templates_arrow(table: pd.DataFrame, features: np.ndarray, ok_rows: np.ndarray) -> pa.Table:
    dim = features.shape[1] if features.ndim == 2 else 0
    emb = np.zeros((len(table), dim), np.float32)
    emb[ok_rows] = features
    mask = ~np.isin(np.arange(len(table)), ok_rows)
    values = pa.array(emb.reshape(-1), pa.float32())
    col = (pa.FixedSizeListArray.from_arrays(values, dim, mask=pa.array(mask)) if dim
           else pa.nulls(len(table)))
    t = pa.Table.from_pandas(table, preserve_index=False)
    return t.append_column("embedding", col)


def score_template_pairs(pairs: pd.DataFrame, template_ids: np.ndarray, features: np.ndarray,
                         cfg: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(scores float64, status codes int8 into :data:`PAIR_STATUSES`) of ``pairs``; a pair
    naming a template without features is unscored (NaN, ``no_features``)."""
    ia = np.searchsorted(template_ids, pairs["template_a"].to_numpy())
    ib = np.searchsorted(template_ids, pairs["template_b"].to_numpy())
    n = len(template_ids)
    ok = ((ia < n) & (ib < n))
    ok[ok] &= (template_ids[ia[ok]] == pairs["template_a"].to_numpy()[ok]) & (
        template_ids[ib[ok]] == pairs["template_b"].to_numpy()[ok])
    scores = np.full(len(pairs), np.nan)
    scores[ok] = score_pairs(features, ia[ok], ib[ok], block=int(cfg["block_templates"]),
                             dtype=np.float32 if cfg["precision"] == "float32" else np.float64,
                             progress=True)
    return scores, np.where(ok, 0, 1).astype(np.int8)


def plot_roc(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | os.PathLike,
             title: str) -> None:
    """TAR over FAR (log axis) of each named curve."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for name, (far, tar) in curves.items():
        ax.plot(far, tar, label=name)
    ax.set_xscale("log")
    ax.set_xlim(1e-6, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("FAR (false accept rate)")
    ax.set_ylabel("TAR (true accept rate)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if curves:
        ax.legend(loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)


def run_templates(root: str | os.PathLike, variant: str,
                  embed_paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
                  cfg: Mapping[str, Any] | None = None, *, model: str,
                  model_cfg: Mapping[str, Any] | None = None,
                  provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every ``templates`` output of one model for the IJB release at ``root``.

    Writes ``templates.parquet`` (one row per template, with its pooled feature),
    ``pairs.parquet`` (every line of the pair file, scored), ``tar_at_far.parquet`` /
    ``.csv`` and ``roc.png``. Returns the TAR texts by FAR. Image lines without a feature
    are counted per template (``n_dropped``) and logged, never silently left out.
    """
    cfg = settings(cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    flip = bool(dict(model_cfg or {}).get("flip", False))
    prov = {**dict(provenance or {}), "stage": "templates", "model": model,
            "variant": variant, "flip": flip,
            **{k: cfg[k] for k in ("norm_score", "detector_score", "media_pooling",
                                   "precision", "readout", "failed")}}
    t0 = time.perf_counter()
    members = read_members(root, variant)
    ids, raw = load_embeddings(embed_paths, members["image_id"].unique(), raw=True)
    log.info("%d image lines in %d templates; %d images have features (%s); flip test %s",
             len(members), members["template_id"].nunique(), len(ids), model,
             "on" if flip else "off (the model has no flip: true)")
    table, pooled = build_templates(members, ids, raw, cfg, template_subjects(root, variant))
    del raw
    n_drop = int(table["n_dropped"].sum())
    if n_drop:
        log.warning("%d image lines have no feature (faces/embed status not ok); they are "
                    "left out of their templates (templates.parquet n_dropped); %d templates "
                    "have none left", n_drop, int((table["status"] != "ok").sum()))
    ok_rows = np.flatnonzero(table["status"].to_numpy() == "ok")
    write_parquet(_templates_arrow(table, pooled.features.astype(np.float32), ok_rows),
                  out / "templates.parquet", provenance=prov)
    log.info("pooled in %.1f s", time.perf_counter() - t0)
    pairs = read_template_pairs(meta_files(root, variant)["pairs"],
                                table["template_id"].to_numpy())
    t1 = time.perf_counter()
    scores, status = score_template_pairs(pairs, pooled.template_ids, pooled.features, cfg)
    log.info("scored %d template pairs in %.1f s", len(pairs), time.perf_counter() - t1)
    n_unscored = int((status != 0).sum())
    ftt = failure_to_template(table["status"])
    if n_unscored:
        log.warning("%d template pairs name a template without features (%d of %d templates "
                    "failed: FTT %.4f): kept in pairs.parquet with status no_features; %s",
                    n_unscored, ftt["n_failed_templates"], ftt["n_templates"],
                    ftt["ftt_rate"],
                    rule_text(cfg["failed"]))
    write_parquet(pa.table({
        "template_a": pairs["template_a"].to_numpy(), "template_b": pairs["template_b"].to_numpy(),
        "label": pairs["label"].to_numpy(), "score": scores,
        "status": pa.DictionaryArray.from_arrays(pa.array(status), pa.array(PAIR_STATUSES)),
    }), out / "pairs.parquet", provenance=prov)
    used, labels = decision_scores(scores, status == 0, pairs["label"].to_numpy(),
                                   cfg["failed"])
    both = bool(0 < labels.sum() < len(labels))
    roc = insightface_roc(used, labels) if both else None
    tab = tar_table(used, labels, cfg["fars"], roc=roc, readout=cfg["readout"])
    tab.insert(0, "model", model)
    tab["n_unscored"] = n_unscored
    tab["n_pairs"] = int(len(labels))
    tab["n_failed"] = n_unscored
    tab["failed"] = cfg["failed"]
    for key, value in ftt.items():
        tab[key] = value
    for r in tab.itertuples(index=False):
        if not r.resolvable:
            log.warning("TAR at FAR %g is not resolvable: %d impostor pairs < 1/FAR",
                        r.far, r.n_impostor)
    write_parquet(tab, out / "tar_at_far.parquet", provenance=prov)
    write_text(out / "tar_at_far.csv", tab.to_csv(index=False))
    log.info("TAR at FAR (%s):\n%s", model, tab[["far", "text", "far_reached"]].to_string(
        index=False))
    curves = {model: thin_roc(roc)} if roc is not None else {}
    plot_roc(curves, out / "roc.png", f"{variant.upper()} 1:1 templates - {model}")
    return dict(zip(tab["far"], tab["text"], strict=True))


def run_template_identification(templates_path: str | os.PathLike,
                                protocol_paths: Mapping[str, str | os.PathLike],
                                out_dir: str | os.PathLike,
                                cfg: Mapping[str, Any] | None = None, *, model: str,
                                groups_path: str | os.PathLike | None = None,
                                provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """1:N of one model: the pooled templates of ``templates.parquet`` searched per the 1:N
    CSVs (``protocol_paths``: ``G1``, ``G2``, ``probe``); writes ``identification.parquet``
    and ``.csv`` (:func:`facecast.templates.identify.identification_table`), per probe
    group too when ``groups_path`` (``groups.parquet`` of rule ``templates_groups``)."""
    cfg = settings(cfg)
    out = Path(out_dir)
    table = read_parquet(templates_path)
    feats = np.zeros((len(table), 0))
    emb = table["embedding"]
    if len(table):
        dim = next((len(v) for v in emb if v is not None), 0)
        feats = np.vstack([np.zeros(dim, np.float32) if v is None else np.asarray(v, np.float32)
                           for v in emb]) if dim else feats
    frames = {role: read_one_n_csv(p) for role, p in protocol_paths.items()}
    probe_groups = None
    if groups_path:
        g = read_parquet(groups_path, columns=["template_id", "group"])
        probe_groups = dict(zip(g["template_id"].tolist(), g["group"].tolist(), strict=True))
    ident = identification_table(table.drop(columns=["embedding"]), feats, frames,
                                 ranks=cfg["ranks"], fpir_targets=cfg["fpir_targets"],
                                 probe_groups=probe_groups, failed=cfg["failed"])
    ident.insert(0, "model", model)
    prov = {**dict(provenance or {}), "stage": "templates", "model": model, "protocol": "1:N",
            "ranks": list(cfg["ranks"]), "fpir_targets": list(cfg["fpir_targets"])}
    write_parquet(ident, out / "identification.parquet", provenance=prov)
    write_text(out / "identification.csv", ident.to_csv(index=False))
    log.info("1:N (%s):\n%s", model, ident[["gallery", "metric", "text"]].to_string(index=False))
    return ident


def run_template_groups(root: str | os.PathLike, variant: str, pairs_path: str | os.PathLike,
                        attributes_path: str | os.PathLike, out_dir: str | os.PathLike,
                        protected: Mapping[str, Any], cfg: Mapping[str, Any] | None = None, *,
                        model: str, provenance: Mapping[str, Any] | None = None
                        ) -> pd.DataFrame:
    """FMR / FNMR per demographic group of one model's template pairs: writes
    ``groups.parquet`` (each template's protected values and group) and
    ``group_rates.parquet`` / ``.csv`` (:mod:`facecast.templates.groups`)."""
    cfg = settings(cfg)
    out = Path(out_dir)
    members = read_members(root, variant)
    groups = template_groups(members, read_parquet(attributes_path), protected)
    pairs = read_parquet(pairs_path, columns=["template_a", "template_b", "label", "score",
                                              "status"])
    rates = template_group_rates(pairs, groups, cfg["fars"], failed=cfg["failed"])
    rates.insert(0, "model", model)
    prov = {**dict(provenance or {}), "stage": "templates", "model": model,
            "protected": dict(protected), "template_attributes": "mean (binned), majority"}
    write_parquet(groups, out / "groups.parquet", provenance=prov)
    write_parquet(rates, out / "group_rates.parquet", provenance=prov)
    write_text(out / "group_rates.csv", rates.to_csv(index=False))
    n_none = int(groups["group"].isna().sum())
    if n_none:
        log.warning("%d of %d templates have no group (no image with the protected "
                    "attributes); their pairs count for no group", n_none, len(groups))
    log.info("FMR / FNMR per group (%s):\n%s", model, rates[
        ["target_fmr", "group", "n_impostor", "fmr", "n_genuine", "fnmr", "resolvable"]
    ].to_string(index=False))
    return rates


def summarise_templates(tables: Sequence[str | os.PathLike], csv_path: str | os.PathLike,
                        html_path: str | os.PathLike,
                        identification: Sequence[str | os.PathLike] = (), *,
                        title: str = "IJB templates") -> pd.DataFrame:
    """Every model's TAR at FAR in one table (models x FAR; ``n/a (k impostors)`` where not
    resolvable), as CSV and an HTML page with the 1:N tables when given."""
    long = pd.concat([read_parquet(p) for p in tables], ignore_index=True)
    wide = long.pivot(index="model", columns="far", values="text")
    wide.columns = [f"TAR@FAR={f:g}" for f in wide.columns]
    wide = wide.reset_index()
    extra = [c for c in ("n_pairs", "n_failed", "failed", "ftt_rate") if c in long.columns]
    counts = long.groupby("model")[["n_genuine", "n_impostor", "n_unscored", *extra]].first()
    wide = wide.merge(counts.reset_index(), on="model")
    write_text(csv_path, wide.to_csv(index=False))
    rules = sorted(set(long["failed"].astype(str))) if "failed" in long.columns else []
    rule = " ".join(rule_text(r) for r in rules if r in FAILED_RULES)
    body = [frame_html(wide, caption=f"{title}: 1:1 verification, TAR at FAR (insightface "
                                     "read-out: the ROC point nearest each FAR). Pairs naming "
                                     f"a template without a feature: {rule or '-'}")]
    if identification:
        ident = pd.concat([read_parquet(p) for p in identification], ignore_index=True)
        w = ident.pivot_table(index=["model", "gallery", "group"], columns="metric",
                              values="text", aggfunc="first").reset_index()
        body.append(frame_html(w, caption=f"{title}: 1:N identification (CMC rank k; "
                                           "TPIR at FPIR, open set on G1 and G2)"))
    write_html_page(html_path, title, body)
    return wide
