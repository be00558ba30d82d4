"""What rule ``identification`` calls: 1:N search of one model on a pool, per group.

Writes into ``results/{ds}/identification/{model}/``:

=========================  =================================================================
``protocol.parquet``       every pool image with its role (gallery / mated / nonmated /
                           unused + reason) and ``failed`` (no embedding: under
                           ``evaluate.failed: nonmatch`` it keeps its role and its
                           searches are misses; under ``drop`` it is unused)
``searches.parquet``       one row per probe: identity, group, mate rank and score, top-k
                           candidate ids and scores
``cmc.parquet/.csv``       identification rate at ranks R, overall and per group
``fnir.parquet/.csv``      FNIR(N, R, T) at FPIR(N, T) targets, overall and per group
                           (T from all non-mated searches)
``det.parquet``            identification DET (FPIR vs FNIR over T), overall and per group
``cmc.png``, ``det.png``   plots
=========================  =================================================================

Entries without a feature count by the one failure rule (:mod:`facecast.identification.misses`);
the CMC and FNIR tables count them (``n_failed``) and the page names the rule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.embed.read import load_embeddings
from facecast.evaluate.failures import DEFAULT_RULE, check_rule, rule_text
from facecast.faces.cuda_fp32 import cuda_fp32
from facecast.fairness.annotate import spec_columns
from facecast.fairness.assess import load_attributes
from facecast.fairness.groups import image_labels, parse_specs
from facecast.identification.metrics import cmc, det_curve, fnir, fnir_at_fpir, fpir
from facecast.identification.misses import search_with_misses
from facecast.identification.protocol import build_protocol, protocol_counts
from facecast.identification.search import SearchResult, search
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, write_html_page

log = logging.getLogger(__name__)


def _write(df: pd.DataFrame, out: Path, stem: str, prov: Mapping[str, Any],
           csv: bool = True) -> None:
    write_parquet(df, out / f"{stem}.parquet", provenance=prov)
    if csv:
        write_text(out / f"{stem}.csv", df.to_csv(index=False))


def run_identification(pool_path: str | os.PathLike, embed_paths: Sequence[str | os.PathLike],
                       attributes_path: str | os.PathLike, out_dir: str | os.PathLike,
                       cfg: Mapping[str, Any], fairness_cfg: Mapping[str, Any], *,
                       model: str, seed: int, failed: str = DEFAULT_RULE,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every identification output for one model (see the module docstring); ``failed``
    is the failure rule (``evaluate.failed``)."""
    check_rule(failed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "identification", "model": model}
    proto = _protocol(pool_path, cfg, seed)
    ids, emb = _used_embeddings(proto, embed_paths, failed)
    log.info("protocol: %s", protocol_counts(proto))
    write_parquet(proto, out / "protocol.parquet", provenance=prov)
    gal, probes = _gallery_and_probes(proto, model)
    ranks = sorted({int(r) for r in cfg.get("ranks", [1, 5, 10, 20])})
    res = _search(gal, probes, ids, emb, ranks, cfg)
    group = _probe_groups(probes, attributes_path, fairness_cfg)
    searches = _searches(probes, group, gal, res)
    if int(searches["failed"].sum()):
        log.warning("%d searches have a probe or mate without a feature; %s",
                    int(searches["failed"].sum()), rule_text(failed))
    write_parquet(searches, out / "searches.parquet", provenance=prov)
    fnir_rank = int(cfg.get("fnir_rank", 1))
    overall = _overall_fnir(searches, cfg, fnir_rank, len(gal))
    cmc_t, fnir_t, det_t = _group_tables(searches, group, overall, ranks, fnir_rank, len(gal))
    for _, row in overall.iterrows():
        if not row["resolvable"]:
            log.warning("FPIR target %g: %s", row["target_fpir"], row["text"])
    _write(cmc_t, out, "cmc", prov)
    _write(fnir_t, out, "fnir", prov)
    _write(det_t, out, "det", prov, csv=False)
    _write_tables_html(out, model, proto, cfg, cmc_t, fnir_t, fnir_rank, failed)
    plot_cmc(cmc_t, out / "cmc.png", f"{model}: CMC (N = {len(gal)})")
    plot_det(det_t, fnir_t, out / "det.png", f"{model}: identification DET (R = {fnir_rank})")
    summary = {"model": model, **protocol_counts(proto), "failed": failed,
               "n_failed": int(searches["failed"].sum()),
               "rank1": float(cmc_t.loc[(cmc_t["group"] == "all") & (cmc_t["rank"] == 1),
                                        "identification_rate"].iloc[0])
               if 1 in ranks else np.nan}
    log.info("identification summary: %s", summary)
    return summary


def _protocol(pool_path: str | os.PathLike, cfg: Mapping[str, Any], seed: int
              ) -> pd.DataFrame:
    """The seeded 1:N protocol (:func:`build_protocol`) on the pool's ``ok`` images; raises
    when the pool lacks ``image_id`` or ``identity``."""
    pool = read_parquet(pool_path)
    if "status" in pool.columns:
        pool = pool[pool["status"].astype(str) == "ok"]
    for col in ("image_id", "identity"):
        if col not in pool.columns:
            raise ValueError(f"{pool_path} lacks column {col!r}")
    return build_protocol(pool, seed=int(seed),
                          heldout_fraction=float(cfg.get("heldout_fraction", 0.2)),
                          gallery_size=int(cfg.get("gallery_size", 0)),
                          max_probes_per_identity=int(cfg.get("max_probes_per_identity", 0)))


def _used_embeddings(proto: pd.DataFrame, embed_paths: Sequence[str | os.PathLike],
                     rule: str = DEFAULT_RULE) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings (ids, matrix) of the images the protocol uses. An image without one
    gets ``failed`` True and the reason ``no embedding (<role>)``; under ``drop`` it
    becomes ``unused``, under ``nonmatch`` it keeps its role (``proto`` in place)."""
    used = proto.loc[proto["role"] != "unused", "image_id"].tolist()
    ids, emb = load_embeddings(embed_paths, used)
    have = set(ids.tolist())
    missing = proto["role"].ne("unused") & ~proto["image_id"].isin(have)
    proto["failed"] = missing.to_numpy(bool)
    proto.loc[missing, "reason"] = "no embedding (" + proto.loc[missing, "role"] + ")"
    if rule == "drop":
        proto.loc[missing, "role"] = "unused"
    return ids, emb


def _gallery_and_probes(proto: pd.DataFrame, model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gallery rows and the probe rows (mated and non-mated), each renumbered; raises
    when either is empty."""
    gal = proto[proto["role"] == "gallery"].reset_index(drop=True)
    probes = proto[proto["role"].isin(["mated", "nonmated"])].reset_index(drop=True)
    if gal.empty or probes.empty:
        raise ValueError(f"identification protocol for {model} has {len(gal)} gallery "
                         f"images and {len(probes)} probes; the pool is too small")
    return gal, probes


def _search(gal: pd.DataFrame, probes: pd.DataFrame, ids: np.ndarray, emb: np.ndarray,
            ranks: list[int], cfg: Mapping[str, Any]) -> SearchResult:
    """Every probe searched against the gallery, top ``max(ranks)`` kept, each mated
    probe's mate (its identity's gallery position) ranked."""
    row_of = {i: k for k, i in enumerate(ids.tolist())}
    gal_rows = np.array([row_of.get(i, -1) for i in gal["image_id"]], dtype=np.int64)
    probe_rows = np.array([row_of.get(i, -1) for i in probes["image_id"]], dtype=np.int64)
    gal_pos = {ident: k for k, ident in enumerate(gal["identity"])}
    mate = np.array([gal_pos.get(i, -1) if r == "mated" else -1
                     for i, r in zip(probes["identity"], probes["role"], strict=True)])
    device = str(cfg.get("device", "auto"))

    def run(g: np.ndarray, p: np.ndarray, m: np.ndarray) -> SearchResult:
        return search(emb[probe_rows[p]], emb[gal_rows[g]], m, k=max(ranks),
                      probe_block=int(cfg.get("probe_block", 2048)),
                      gallery_block=int(cfg.get("gallery_block", 16384)), device=device,
                      precision=str(cfg.get("precision", "float32")), progress=True)

    with cuda_fp32(device):  # fp32 score blocks on CUDA: no TF32 (facecast.faces.cuda_fp32)
        return search_with_misses(gal_rows >= 0, probe_rows >= 0, mate, max(ranks), run)


def _probe_groups(probes: pd.DataFrame, attributes_path: str | os.PathLike,
                  fairness_cfg: Mapping[str, Any]) -> np.ndarray:
    """Each probe's protected group (``fairness.protected``, per-identity vote); all None
    when no protected attribute is configured."""
    protected = parse_specs(fairness_cfg.get("protected"))
    group = np.full(len(probes), None, dtype=object)
    if protected:
        attrs = load_attributes(attributes_path, probes["identity"].unique(),
                                spec_columns({"protected": fairness_cfg.get("protected")}))
        labels = image_labels(attrs, protected, [], sync=fairness_cfg.get("sync", "majority"))
        group = labels["group"].reindex(probes["image_id"].to_numpy()).to_numpy(object)
    return group


def _searches(probes: pd.DataFrame, group: np.ndarray, gal: pd.DataFrame,
              found: tuple[SearchResult, np.ndarray]) -> pd.DataFrame:
    """One row per probe: identity, role, group, mate rank and score, top-1 score (``-inf``
    for a probe without a feature), ``failed`` (the probe or its mate has no feature) and
    the top-k gallery image ids and scores."""
    res, failed = found
    gal_ids = gal["image_id"].to_numpy(object)
    top1 = (res.top_score[:, 0] if res.top_score.shape[1]
            else np.full(len(probes), -np.inf, np.float32))
    return probes[["image_id", "identity", "role"]].assign(
        group=group, mate_rank=res.mate_rank, mate_score=res.mate_score,
        top1_score=top1, failed=failed,
        top_ids=[list(gal_ids[r[r >= 0]]) for r in res.top_index],
        top_scores=[list(map(float, s[r >= 0])) for r, s in zip(res.top_index, res.top_score,
                                                                strict=True)])


def _overall_fnir(searches: pd.DataFrame, cfg: Mapping[str, Any], fnir_rank: int,
                  n_gallery: int) -> pd.DataFrame:
    """FNIR at each target FPIR over all searches, T set from all non-mated searches
    (group ``all``)."""
    targets = [float(t) for t in cfg.get("fpir_targets", [0.01, 0.1])]
    nonm = searches["role"] == "nonmated"
    top1_nm = searches.loc[nonm, "top1_score"].to_numpy(np.float64)
    overall = fnir_at_fpir(searches["mate_rank"], searches["mate_score"], top1_nm, targets,
                           fnir_rank)
    overall.insert(0, "group", "all")
    overall["n_gallery"] = n_gallery
    overall["n_failed"] = int(searches["failed"].sum())
    return overall


def _group_tables(searches: pd.DataFrame, group: np.ndarray, overall: pd.DataFrame,
                  ranks: list[int], fnir_rank: int, n_gallery: int
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """CMC, FNIR and DET tables for group ``all`` and each protected group; a group's FNIR
    and FPIR are taken at the overall T of each target."""
    mated = searches["role"] == "mated"
    nonm = searches["role"] == "nonmated"
    cmc_rows, fnir_rows, det_rows = [], [overall], []
    groups = ["all", *sorted({str(g) for g in group if g is not None and pd.notna(g)})]
    for name in groups:
        m = np.ones(len(searches), bool) if name == "all" else (searches["group"] == name)
        m = np.asarray(m, bool)
        rates = cmc(searches.loc[m & mated, "mate_rank"], ranks)
        for r, v in zip(ranks, rates, strict=True):
            cmc_rows.append({"group": name, "rank": r, "identification_rate": v,
                             "n_mated": int((m & mated).sum()), "n_gallery": n_gallery,
                             "n_failed": int((m & mated & searches["failed"]).sum())})
        d = det_curve(searches.loc[m, "mate_rank"], searches.loc[m, "mate_score"],
                      searches.loc[m & nonm, "top1_score"], fnir_rank)
        det_rows.append(d.assign(group=name))
        if name != "all":
            fnir_rows.append(_group_fnir(searches, m, name, overall, fnir_rank, n_gallery))
    return (pd.DataFrame(cmc_rows), pd.concat(fnir_rows, ignore_index=True),
            pd.concat(det_rows, ignore_index=True))


def _group_fnir(searches: pd.DataFrame, m: np.ndarray, name: str, overall: pd.DataFrame,
                fnir_rank: int, n_gallery: int) -> pd.DataFrame:
    """FNIR and FPIR of the searches ``m`` (group ``name``) at each overall threshold."""
    mated = searches["role"] == "mated"
    nonm = searches["role"] == "nonmated"
    sub = []
    for _, row in overall.iterrows():
        t = row["threshold"]
        nm_g = searches.loc[m & nonm, "top1_score"].to_numpy(np.float64)
        f = fnir(searches.loc[m, "mate_rank"], searches.loc[m, "mate_score"], fnir_rank, t)
        sub.append({"group": name, "target_fpir": row["target_fpir"], "threshold": t,
                    "fpir": fpir(nm_g, t), "fnir": f, "rank": fnir_rank,
                    "n_mated": int((m & mated).sum()), "n_nonmated": int(nm_g.size),
                    "resolvable": bool(row["resolvable"]),
                    "text": f"{f:.4g}" if row["resolvable"] and np.isfinite(f)
                    else row["text"], "n_gallery": n_gallery,
                    "n_failed": int((m & searches["failed"]).sum())})
    return pd.DataFrame(sub)


def _write_tables_html(out: Path, model: str, proto: pd.DataFrame, cfg: Mapping[str, Any],
                       cmc_t: pd.DataFrame, fnir_t: pd.DataFrame, fnir_rank: int,
                       rule: str = DEFAULT_RULE) -> None:
    """tables.html: the protocol in words, the CMC table and the FNIR table."""
    counts = protocol_counts(proto)
    write_html_page(out / "tables.html", f"Identification: {model}", [
        f"<p>Open-set 1:N search (ISO/IEC 19795-1) on pool {cfg.get('pool', '')}: "
        f"{counts['n_gallery']} enrolled identities (N), {counts['n_mated']} mated and "
        f"{counts['n_nonmated']} non-mated searches ({counts['n_identities_nonmated']} "
        "identities held out of the gallery). T for each target FPIR from all non-mated "
        f"searches. Entries without a feature: {int(proto['failed'].sum())}; "
        + ("a probe or gallery entry without a feature is a miss (evaluate.failed: "
           "nonmatch, ISO/IEC 19795-1): its mated searches miss, its non-mated searches "
           "return no candidate." if rule == "nonmatch" else
           "left out of the protocol (evaluate.failed: drop).") + "</p>",
        frame_html(cmc_t, caption="CMC: identification rate at rank R"),
        frame_html(fnir_t, caption=f"FNIR(N, R={fnir_rank}, T) at FPIR(N, T)")])


def plot_cmc(table: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """Identification rate against rank, overall and per group."""
    fig, ax = pyplot().subplots(figsize=(5.5, 4), constrained_layout=True)
    for name, sub in table.groupby("group", sort=False):
        ax.plot(sub["rank"], sub["identification_rate"], marker="o",
                lw=2.2 if name == "all" else 1.2,
                label=f"{name} ({int(sub['n_mated'].iloc[0])} searches)")
    ax.set_xscale("log")
    ax.set_xlabel("rank R")
    ax.set_ylabel("identification rate (CMC)")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)


def plot_det(det: pd.DataFrame, fnir_t: pd.DataFrame, path: str | os.PathLike,
             title: str) -> None:
    """FNIR against FPIR (log x), overall and per group; target FPIRs marked."""
    fig, ax = pyplot().subplots(figsize=(5.5, 4), constrained_layout=True)
    for name, sub in det.groupby("group", sort=False):
        keep = sub["fpir"] > 0
        ax.plot(sub.loc[keep, "fpir"], sub.loc[keep, "fnir"], lw=2.2 if name == "all" else 1.2,
                label=str(name))
    for t in sorted(set(fnir_t["target_fpir"])):
        ax.axvline(t, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("FPIR(N, T)")
    ax.set_ylabel("FNIR(N, R, T)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)
