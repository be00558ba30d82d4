"""Stage ``audit``: how far can the attribute labels be trusted? (results/{ds}/audit/).

Reads ``attributes.parquet`` (labels ``<label_prefix><attr>``, scorer probabilities),
optionally embedding shards (features of the out-of-fold model), a second annotation CSV
keyed by ``image_id``, and the faces shards (thumbnails of the top suspects). Writes:

- ``metrics.parquet/.csv``: per attribute and source, F1 first, with the baselines
  (prevalence, majority accuracy, all-positive F1) and macro averages.
- ``rules.csv`` (one row per contradiction rule) and ``flags.parquet`` (per image).
- ``kappa.csv``: Fleiss' kappa per attribute (identities = items, images = raters),
  Cohen's kappa label vs each thresholded prediction / second source, Krippendorff's
  alpha across all sources; ``reliable`` per attribute (what ``describe`` keeps).
- ``predictions.parquet``: the out-of-fold probabilities ``p_<attr>`` (``describe`` reads
  them).
- ``suspects.parquet`` (+ top rows as CSV), ``identities.parquet`` (identity-level
  suspects), ``suspects_grid.png``.
- ``group_skew.csv`` (P(label | group), P(prediction | group), disagreement rates per
  group) and ``phi.csv`` + ``phi.png`` (label vs prediction co-occurrence: amplification).
- ``recovery.csv`` when ``truth_prefix`` names clean labels (the synthetic demo): actual
  flip rates, expected kappa (1 - 2e)^2, suspect AUROC of the actual flips.
- Plots ``kappa.png``, ``f1_vs_prevalence.png``, ``measurements.png`` and ``summary.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.agreement import (
    cohen_kappa,
    fleiss_kappa_by_group,
    krippendorff_alpha_nominal,
    leave_one_out_disagreement,
)
from facecast.labels.html import write_html
from facecast.labels.metrics import METRIC_COLUMNS, attribute_metrics, macro_row
from facecast.labels.plots import (
    f1_prevalence_plot,
    kappa_plot,
    measurement_plot,
    phi_plot,
    suspects_grid,
)
from facecast.labels.rules import evaluate_rules, rules_from_config
from facecast.labels.suspects import identity_suspects, oof_probabilities, rank_suspects

__all__ = ["AUDIT_DEFAULTS", "binary_attributes", "group_skew", "phi_matrix", "run_audit"]

log = logging.getLogger(__name__)

AUDIT_DEFAULTS: dict[str, Any] = {
    "enabled": False, "label_prefix": "label_", "attributes": [], "truth_prefix": "",
    "invariant": [], "rule_set": "none", "rules": {}, "predictions": {}, "second_source": "",
    "model": {"embedding": "", "columns": [], "folds": 3, "C": 1.0},
    "weights": {"model": 1.0, "identity": 1.0, "rule": 1.0},
    "min_kappa": 0.3, "min_f1": 0.6, "grid_top": 6, "threshold": 0.5,
}


def merged_cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``audit`` config over :data:`AUDIT_DEFAULTS` (one level deep for ``model``/``weights``)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in AUDIT_DEFAULTS.items()}
    for k, v in (cfg or {}).items():
        out[k] = (out[k] | dict(v)) if k in ("model", "weights") and isinstance(v, dict) else v
    return out


def binary_attributes(table: pd.DataFrame, prefix: str, names: Sequence[str] = ()) -> list[str]:
    """Attribute names whose ``prefix + name`` column is 0/1 (NaN allowed)."""
    if names:
        missing = [n for n in names if prefix + n not in table.columns]
        if missing:
            raise KeyError(f"audit.attributes: no column(s) {[prefix + n for n in missing]} "
                           f"in attributes.parquet")
        return list(names)
    out = []
    for c in table.columns:
        if c.startswith(prefix) and pd.api.types.is_numeric_dtype(table[c]):
            v = table[c].dropna().unique()
            if v.size and np.isin(v, [0.0, 1.0]).all():
                out.append(c[len(prefix):])
    return sorted(out)


def phi_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """Phi (Pearson on 0/1) between every pair of binary columns (pairwise complete)."""
    return (frame >= 0.5).where(frame.notna()).astype(float).corr(min_periods=3)


def group_skew(groups: pd.DataFrame, labels: pd.DataFrame, preds: pd.DataFrame | None,
               identity_disagreement: pd.DataFrame) -> pd.DataFrame:
    """P(label=1 | group) and P(prediction=1 | group) per grouping, group and attribute,
    plus label-vs-prediction and label-vs-identity-majority disagreement rates."""
    rows = []
    for grouping in groups.columns:
        g = groups[grouping]
        for name in sorted(g.dropna().unique()):
            m = (g == name).to_numpy()
            for a in labels.columns:
                y = labels[a].to_numpy(dtype=float)[m]
                ok = np.isfinite(y)
                row = {"grouping": grouping, "group": name, "attribute": a, "n": int(ok.sum()),
                       "p_label": float(np.mean(y[ok] >= 0.5)) if ok.any() else np.nan,
                       "p_pred": np.nan, "disagree_model": np.nan,
                       "disagree_identity": np.nan}
                if preds is not None and a in preds.columns:
                    p = preds[a].to_numpy(dtype=float)[m]
                    both = ok & np.isfinite(p)
                    if both.any():
                        row["p_pred"] = float(np.mean(p[both] >= 0.5))
                        row["disagree_model"] = float(np.mean((p[both] >= 0.5)
                                                              != (y[both] >= 0.5)))
                if a in identity_disagreement.columns:
                    d = identity_disagreement[a].to_numpy(dtype=float)[m]
                    if np.isfinite(d).any():
                        row["disagree_identity"] = float(np.nanmean(d > 0.5))
                rows.append(row)
    return pd.DataFrame(rows, columns=["grouping", "group", "attribute", "n", "p_label",
                                       "p_pred", "disagree_model", "disagree_identity"])


def _embedding_features(paths: Sequence[str], image_ids: pd.Index) -> np.ndarray:
    frames = [read_parquet(p, columns=["image_id", "embedding"]) for p in paths]
    emb = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["image_id", "embedding"])
    emb = emb.dropna(subset=["embedding"]).drop_duplicates("image_id").set_index("image_id")
    dim = len(emb["embedding"].iloc[0]) if len(emb) else 0
    x = np.full((len(image_ids), dim), np.nan)
    pos = emb.index.get_indexer(image_ids)
    have = pos >= 0
    if dim and have.any():
        x[have] = np.stack(emb["embedding"].to_numpy()[pos[have]]).astype(float)
    return x


def _auroc(flipped: np.ndarray, score: np.ndarray) -> float:
    ok = np.isfinite(score)
    f = flipped[ok]
    return float(roc_auc_score(f, score[ok])) if 0 < f.sum() < f.size else float("nan")


def run_audit(attributes: str | os.PathLike, out_dir: str | os.PathLike,
              cfg: Mapping[str, Any], *, embeddings: Sequence[str] = (),
              faces: Sequence[str] = (), features: str | os.PathLike | None = None,
              protected: Mapping[str, Any] | None = None, seed: int = 0,
              provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the label audit; write every artifact under ``out_dir``; return a summary dict."""
    from facecast.fairness.groups import image_labels, parse_specs

    c = merged_cfg(cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = dict(provenance or {}) | {"stage": "audit"}
    table = read_parquet(attributes).reset_index(drop=True)
    table["image_id"] = table["image_id"].astype(str)
    prefix = c["label_prefix"]
    attrs = binary_attributes(table, prefix, c["attributes"])
    if not attrs:
        reason = f"n/a (no 0/1 column with prefix {prefix!r} in attributes.parquet)"
        log.warning("audit: %s; every output says so", reason)
        return _write_empty(out, table, reason, prov)
    log.info("audit: %d images, %d attributes: %s", len(table), len(attrs), attrs)
    idx = pd.Index(table["image_id"])
    labels = pd.DataFrame({a: table[prefix + a].to_numpy(dtype=float) for a in attrs}, index=idx)
    identity = table["identity"].astype(str).to_numpy()
    invariant = [a for a in c["invariant"] if a in attrs]

    # ---- sources of predictions: the out-of-fold model, scorer columns, a second source
    sources: dict[str, pd.DataFrame] = {}
    model = c["model"]
    feats = []
    if model.get("embedding"):
        feats.append(_embedding_features(list(embeddings), idx))
    notes = []
    for col in model.get("columns") or []:
        if col not in table.columns:
            notes.append(f"audit.model.columns: {col!r} not in attributes.parquet (left out)")
            continue
        feats.append(table[[col]].to_numpy(dtype=float))
    oof = None
    if model.get("embedding") and not list(embeddings):
        notes.append(f"audit.model.embedding: no {model['embedding']} embedding shards")
    feats = [f for f in feats if f.shape[1]]
    if feats:
        x = np.concatenate(feats, axis=1)
        log.info("audit: out-of-fold model on %d features, %d folds", x.shape[1],
                 int(model["folds"]))
        oof = oof_probabilities(x, labels, identity, folds=int(model["folds"]),
                                c=float(model["C"]), seed=seed)
        sources["oof"] = oof
        pred_out = oof.add_prefix("p_").reset_index(names="image_id")
        write_parquet(pred_out, out / "predictions.parquet", provenance=prov | {
            "model": "out-of-fold logistic regression", "folds": int(model["folds"])})
    else:
        write_parquet(pd.DataFrame({"image_id": idx.to_numpy()}), out / "predictions.parquet",
                      provenance=prov | {"model": "none (audit.model has no features)"})
    for a, col in (c["predictions"] or {}).items():
        if col not in table.columns:
            notes.append(f"audit.predictions.{a}: {col!r} not in attributes.parquet (left out)")
            continue
        if a in attrs:
            sources.setdefault(f"scorer:{col}", pd.DataFrame(index=idx))[a] = \
                table[col].to_numpy(dtype=float)
    if c["second_source"]:
        second = pd.read_csv(c["second_source"], dtype={"image_id": str}).set_index("image_id")
        s2 = pd.DataFrame(index=idx)
        for a in attrs:
            col = a if a in second.columns else prefix + a if prefix + a in second.columns \
                else None
            if col is not None:
                s2[a] = second[col].reindex(idx).to_numpy(dtype=float)
        log.info("audit: second source %s covers %d attributes", c["second_source"],
                 s2.shape[1])
        sources["second_source"] = s2

    for note in notes:
        log.warning("audit: %s", note)

    # ---- metrics, F1 first
    rows = []
    for a in attrs:
        rows.append(attribute_metrics(a, labels[a].to_numpy(), None, "baseline"))
        for name, src in sources.items():
            if a in src.columns:
                rows.append(attribute_metrics(a, labels[a].to_numpy(), src[a].to_numpy(),
                                              name, float(c["threshold"])))
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    macros = [macro_row(metrics, s) for s in ["baseline", *sources]]
    metrics = pd.concat([metrics, pd.DataFrame(macros, columns=METRIC_COLUMNS)],
                        ignore_index=True)
    for s in ["baseline", *sources]:  # macro baselines are means too
        base = metrics[(metrics["source"] == s) & (metrics["attribute"] != "macro average")]
        for col in ("prevalence", "majority_accuracy", "all_positive_f1"):
            metrics.loc[(metrics["source"] == s) & (metrics["attribute"] == "macro average"),
                        col] = float(base[col].mean()) if len(base) else np.nan
    write_parquet(metrics, out / "metrics.parquet", provenance=prov)
    metrics.to_csv(out / "metrics.csv", index=False, float_format="%.4f")

    # ---- contradictions
    rules = rules_from_config(c)
    flags, rule_table = evaluate_rules(labels, rules)
    for _, r in rule_table[rule_table["status"] != "ok"].iterrows():
        log.warning("audit: rule %s not applied: %s", r["rule"], r["status"])
    rule_table.to_csv(out / "rules.csv", index=False, float_format="%.6f")

    # ---- agreement
    kappas, krows = {}, []
    id_dis = pd.DataFrame(index=idx)
    for a in attrs:
        k, n_items, n_r = fleiss_kappa_by_group(labels[a].to_numpy(), identity)
        kappas[a] = k
        row = {"attribute": a, "invariant": a in invariant, "fleiss_kappa": k,
               "n_identities": n_items, "n_images": n_r,
               "fleiss_status": "ok" if np.isfinite(k) else
               f"n/a ({n_items} identities with >= 2 images, or one class only)"}
        mats = [labels[a].to_numpy(dtype=float)]
        for name, src in sources.items():
            if a in src.columns:
                row[f"cohen_{name}"] = cohen_kappa(labels[a].to_numpy(), src[a].to_numpy())
                p = src[a].to_numpy(dtype=float)
                mats.append(np.where(np.isfinite(p), (p >= float(c["threshold"])).astype(float),
                                     np.nan) if name != "second_source" else p)
        row["n_sources"] = len(mats)
        row["krippendorff_alpha"] = (krippendorff_alpha_nominal(np.stack(mats, axis=1))
                                     if len(mats) >= 2 else np.nan)
        krows.append(row)
        if a in invariant:
            id_dis[a] = leave_one_out_disagreement(labels[a].to_numpy(), identity)[0]
    flag_out = flags.reset_index(names="image_id")
    flag_out.insert(1, "identity", identity)
    for a in id_dis.columns:  # the image's label differs from most of its identity's others
        flag_out[f"identity_disagree_{a}"] = (id_dis[a].to_numpy() > 0.5)
    write_parquet(flag_out, out / "flags.parquet", provenance=prov)
    kappa_table = pd.DataFrame(krows)
    f1_src = "oof" if "oof" in sources else next(iter(sources), None)
    f1 = metrics[(metrics["source"] == f1_src)].set_index("attribute")["f1"] if f1_src else None
    kappa_table["f1"] = [float(f1.get(a, np.nan)) if f1 is not None else np.nan for a in attrs]
    kappa_table["reliable"] = [
        not ((r.invariant and not (r.fleiss_kappa >= float(c["min_kappa"])))
             or (np.isfinite(r.f1) and r.f1 < float(c["min_f1"])))
        for r in kappa_table.itertuples()]
    kappa_table.to_csv(out / "kappa.csv", index=False, float_format="%.4f")
    write_parquet(kappa_table, out / "kappa.parquet", provenance=prov)

    # ---- suspects
    suspects = rank_suspects(table["image_id"], identity, labels, oof, kappas, invariant, flags,
                             {k: v for k, v in rules.items() if k in flags.columns},
                             c["weights"])
    write_parquet(suspects, out / "suspects.parquet", provenance=prov)
    suspects.head(200).to_csv(out / "suspects_top.csv", index=False, float_format="%.4f")
    ids = identity_suspects(identity, labels, oof, invariant) if oof is not None else \
        pd.DataFrame(columns=["attribute", "identity", "n_images", "share_positive",
                              "model_mean", "disagree", "score", "rank"])
    write_parquet(ids, out / "identities.parquet", provenance=prov)
    top = (suspects.groupby("attribute", sort=True).head(int(c["grid_top"])))
    suspects_grid(top, list(faces), out / "suspects_grid.png")

    # ---- group skew and bias amplification
    specs = parse_specs(protected or {})
    usable = [s for s in specs if s.column in table.columns]
    if usable:
        g = image_labels(table, usable, [], sync="majority")
        groups = g[[s.name for s in usable] + (["group"] if len(usable) > 1 else [])]
        groups.index = idx
    else:
        groups = pd.DataFrame(index=idx)
        log.warning("audit: no fairness.protected column in the table; group skew is empty")
    skew = group_skew(groups, labels, oof, id_dis)
    skew.to_csv(out / "group_skew.csv", index=False, float_format="%.4f")
    phi_l = phi_matrix(labels)
    phi_rows = []
    phi_p = phi_matrix(oof) if oof is not None else None
    for i, a in enumerate(attrs):
        for b in attrs[i + 1:]:
            lv = float(phi_l.loc[a, b])
            pv = float(phi_p.loc[a, b]) if phi_p is not None else np.nan
            phi_rows.append({"a": a, "b": b, "phi_label": lv, "phi_pred": pv,
                             "amplification": pv - lv})
    phi = pd.DataFrame(phi_rows, columns=["a", "b", "phi_label", "phi_pred", "amplification"])
    phi.to_csv(out / "phi.csv", index=False, float_format="%.4f")
    phi_plot(phi_l, phi_p, out / "phi.png")

    # ---- recovery of planted noise (truth known)
    rec_rows = []
    if c["truth_prefix"]:
        for a in attrs:
            tcol = c["truth_prefix"] + a
            if tcol not in table.columns:
                continue
            t = table[tcol].to_numpy(dtype=float) >= 0.5
            y = labels[a].to_numpy(dtype=float) >= 0.5
            flipped = t != y
            e = float(flipped.mean())
            sub = suspects[suspects["attribute"] == a].set_index("image_id")["score"]
            sc = sub.reindex(idx).to_numpy(dtype=float)
            rec_rows.append({"attribute": a, "flip_rate": e, "n_flipped": int(flipped.sum()),
                             "fleiss_kappa": kappas[a], "expected_kappa": (1 - 2 * e) ** 2,
                             "suspect_auroc": _auroc(flipped, sc)})
    recovery = pd.DataFrame(rec_rows, columns=["attribute", "flip_rate", "n_flipped",
                                               "fleiss_kappa", "expected_kappa",
                                               "suspect_auroc"])
    recovery.to_csv(out / "recovery.csv", index=False, float_format="%.4f")

    # ---- plots
    kappa_plot(kappa_table, out / "kappa.png")
    f1_prevalence_plot(metrics[metrics["attribute"] != "macro average"], out /
                       "f1_vs_prevalence.png")
    meas = read_parquet(features) if features and Path(features).exists() else None
    measurement_plot(meas, labels, out / "measurements.png")

    summary = {"n_images": int(len(table)), "attributes": attrs,
               "rule_rates": dict(zip(rule_table["rule"], rule_table["rate"], strict=True)),
               "kappa": kappas}
    lines = ["# Label audit", "", f"{len(table)} images, {len(attrs)} attributes "
             f"(`{prefix}*`); sources: {', '.join(sources) or 'none'}.", "",
             *[f"- {n}" for n in notes], "",
             "## Metrics (F1 first)", "", metrics.to_markdown(index=False, floatfmt=".3f"), "",
             "## Contradictions", "", rule_table.to_markdown(index=False, floatfmt=".4f"), "",
             "## Agreement", "", kappa_table.to_markdown(index=False, floatfmt=".3f"), ""]
    if len(recovery):
        lines += ["## Recovery of planted noise", "",
                  recovery.to_markdown(index=False, floatfmt=".3f"), ""]
    write_text(out / "summary.md", "\n".join(lines))
    sections = [("Notes", "; ".join(notes) or "none"),
                ("Metrics per attribute (F1 first)", metrics),
                ("Contradiction rules", rule_table),
                ("Agreement (Fleiss: identities x images; Cohen; Krippendorff)", kappa_table)]
    if len(recovery):
        sections.append(("Recovery of the planted noise (truth known)", recovery))
    sections += [("Top 30 suspect labels", suspects.head(30)),
                 ("Identity-level suspects (top 10 per attribute)",
                  ids.groupby("attribute").head(10) if len(ids) else ids),
                 ("Group skew: P(label | group), P(prediction | group), disagreement", skew),
                 ("Label vs prediction phi (bias amplification)", phi)]
    write_html(out / "report.html", "Label audit", sections)
    return summary


def _write_empty(out: Path, table: pd.DataFrame, reason: str,
                 prov: Mapping[str, Any]) -> dict[str, Any]:
    """Every audit output, each saying why there is nothing to audit."""
    status = pd.DataFrame({"status": [reason]})
    ids = pd.DataFrame({"image_id": table["image_id"].astype(str),
                        "identity": table["identity"].astype(str), "status": reason})
    for name in ("metrics", "kappa"):
        write_parquet(status, out / f"{name}.parquet", provenance=prov)
        status.to_csv(out / f"{name}.csv", index=False)
    for name in ("rules", "suspects_top", "group_skew", "phi", "recovery"):
        status.to_csv(out / f"{name}.csv", index=False)
    for name in ("flags", "predictions"):
        write_parquet(ids, out / f"{name}.parquet", provenance=prov)
    write_parquet(pd.DataFrame(columns=["image_id", "identity", "attribute", "label", "score",
                                        "model", "identity_disagreement", "rule", "reasons",
                                        "rank"]), out / "suspects.parquet", provenance=prov)
    write_parquet(pd.DataFrame(columns=["attribute", "identity"]), out / "identities.parquet",
                  provenance=prov)
    write_text(out / "summary.md", f"# Label audit\n\n{reason}\n")
    write_html(out / "report.html", "Label audit", [("Status", reason)])
    from facecast.report.figures import pyplot, save_figure

    for name in ("kappa", "f1_vs_prevalence", "phi", "measurements", "suspects_grid"):
        fig, ax = pyplot().subplots(figsize=(5, 1.5))
        ax.text(0.5, 0.5, reason, ha="center", va="center", fontsize=8, wrap=True)
        ax.set_axis_off()
        save_figure(fig, out / f"{name}.png")
    return {"n_images": int(len(table)), "attributes": [], "status": reason}
