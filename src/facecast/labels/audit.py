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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.agreement import (
    cohen_kappa,
    fleiss_kappa_by_group,
    krippendorff_alpha_nominal,
    leave_one_out_disagreement,
)
from facecast.labels.audit_report import write_empty, write_figures, write_reports
from facecast.labels.metrics import METRIC_COLUMNS, attribute_metrics, macro_row
from facecast.labels.plots import phi_plot, suspects_grid
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


@dataclass(frozen=True)
class _Audit:
    """What every audit step reads: the merged config, the attribute table, the audited
    attributes with their labels (index ``image_id``), identities, where outputs go."""

    c: dict[str, Any]
    table: pd.DataFrame
    attrs: list[str]
    labels: pd.DataFrame
    identity: np.ndarray
    invariant: list[str]
    out: Path
    prov: dict[str, Any]

    @property
    def idx(self) -> pd.Index:
        """The images' ids, in table order."""
        return self.labels.index


def run_audit(attributes: str | os.PathLike, out_dir: str | os.PathLike,
              cfg: Mapping[str, Any], *, embeddings: Sequence[str] = (),
              faces: Sequence[str] = (), features: str | os.PathLike | None = None,
              protected: Mapping[str, Any] | None = None, seed: int = 0,
              provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the label audit; write every artifact under ``out_dir``; return a summary dict."""
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
        return write_empty(out, table, reason, prov)
    log.info("audit: %d images, %d attributes: %s", len(table), len(attrs), attrs)
    a = _audit(c, table, attrs, out, prov)
    sources, oof, notes = _prediction_sources(a, embeddings, seed)
    for note in notes:
        log.warning("audit: %s", note)
    metrics = _metrics(a, sources)
    rules = rules_from_config(c)
    flags, rule_table = _contradictions(a, rules)
    kappas, kappa_rows, id_dis = _agreement(a, sources)
    _write_flags(a, flags, id_dis)
    kappa_table = _kappa_table(a, kappa_rows, metrics, sources)
    suspects, ids = _suspects(a, oof, kappas, flags, rules, faces)
    skew, phi = _skew_and_amplification(a, oof, id_dis, protected)
    recovery = _recovery(a, suspects, kappas)
    write_figures(out, kappa_table, metrics, a.labels, features)
    summary = {"n_images": int(len(table)), "attributes": attrs,
               "rule_rates": dict(zip(rule_table["rule"], rule_table["rate"], strict=True)),
               "kappa": kappas}
    write_reports(out, n_images=len(table), attrs=attrs, prefix=prefix, sources=list(sources),
                  notes=notes, metrics=metrics, rule_table=rule_table,
                  kappa_table=kappa_table, recovery=recovery, suspects=suspects, ids=ids,
                  skew=skew, phi=phi)
    return summary


def _audit(c: dict[str, Any], table: pd.DataFrame, attrs: list[str], out: Path,
           prov: dict[str, Any]) -> _Audit:
    """The labels (``<label_prefix><attr>`` as float), identities and the invariant
    attributes that are audited."""
    idx = pd.Index(table["image_id"])
    prefix = c["label_prefix"]
    labels = pd.DataFrame({a: table[prefix + a].to_numpy(dtype=float) for a in attrs}, index=idx)
    return _Audit(c=c, table=table, attrs=attrs, labels=labels,
                  identity=table["identity"].astype(str).to_numpy(),
                  invariant=[a for a in c["invariant"] if a in attrs], out=out, prov=prov)


def _prediction_sources(a: _Audit, embeddings: Sequence[str], seed: int
                        ) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None, list[str]]:
    """The predictions the labels are checked against, by source name: ``oof`` (the
    out-of-fold model, :func:`_oof_model`), ``scorer:<column>`` (scorer columns named by
    ``predictions``), ``second_source`` (a second annotation CSV); also the out-of-fold
    probabilities alone and notes on what was left out."""
    notes: list[str] = []
    sources: dict[str, pd.DataFrame] = {}
    oof = _oof_model(a, embeddings, seed, notes)
    if oof is not None:
        sources["oof"] = oof
    for attr, col in (a.c["predictions"] or {}).items():
        if col not in a.table.columns:
            notes.append(f"audit.predictions.{attr}: {col!r} not in attributes.parquet (left out)")
            continue
        if attr in a.attrs:
            sources.setdefault(f"scorer:{col}", pd.DataFrame(index=a.idx))[attr] = \
                a.table[col].to_numpy(dtype=float)
    if a.c["second_source"]:
        sources["second_source"] = _second_source(a)
    return sources, oof, notes


def _oof_model(a: _Audit, embeddings: Sequence[str], seed: int,
               notes: list[str]) -> pd.DataFrame | None:
    """Out-of-fold logistic-regression probabilities per attribute from the ``model``
    features (embeddings and/or table columns), None without features; writes
    predictions.parquet either way. Appends a note per missing feature (to ``notes``)."""
    model = a.c["model"]
    feats = []
    if model.get("embedding"):
        feats.append(_embedding_features(list(embeddings), a.idx))
    for col in model.get("columns") or []:
        if col not in a.table.columns:
            notes.append(f"audit.model.columns: {col!r} not in attributes.parquet (left out)")
            continue
        feats.append(a.table[[col]].to_numpy(dtype=float))
    if model.get("embedding") and not list(embeddings):
        notes.append(f"audit.model.embedding: no {model['embedding']} embedding shards")
    feats = [f for f in feats if f.shape[1]]
    if not feats:
        write_parquet(pd.DataFrame({"image_id": a.idx.to_numpy()}),
                      a.out / "predictions.parquet",
                      provenance=a.prov | {"model": "none (audit.model has no features)"})
        return None
    x = np.concatenate(feats, axis=1)
    log.info("audit: out-of-fold model on %d features, %d folds", x.shape[1],
             int(model["folds"]))
    oof = oof_probabilities(x, a.labels, a.identity, folds=int(model["folds"]),
                            c=float(model["C"]), seed=seed)
    pred_out = oof.add_prefix("p_").reset_index(names="image_id")
    write_parquet(pred_out, a.out / "predictions.parquet", provenance=a.prov | {
        "model": "out-of-fold logistic regression", "folds": int(model["folds"])})
    return oof


def _second_source(a: _Audit) -> pd.DataFrame:
    """The second annotation CSV's labels (column ``<attr>`` or ``<label_prefix><attr>``)
    aligned to the table's images."""
    prefix = a.c["label_prefix"]
    second = pd.read_csv(a.c["second_source"], dtype={"image_id": str}).set_index("image_id")
    s2 = pd.DataFrame(index=a.idx)
    for attr in a.attrs:
        col = attr if attr in second.columns else prefix + attr \
            if prefix + attr in second.columns else None
        if col is not None:
            s2[attr] = second[col].reindex(a.idx).to_numpy(dtype=float)
    log.info("audit: second source %s covers %d attributes", a.c["second_source"],
             s2.shape[1])
    return s2


def _metrics(a: _Audit, sources: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per attribute and source: F1 first, with the baselines; macro averages (baselines
    averaged too) last. Writes metrics.parquet and metrics.csv."""
    rows = []
    for attr in a.attrs:
        y = a.labels[attr].to_numpy()
        rows.append(attribute_metrics(attr, y, None, "baseline"))
        for name, src in sources.items():
            if attr in src.columns:
                rows.append(attribute_metrics(attr, y, src[attr].to_numpy(), name,
                                              float(a.c["threshold"])))
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    macros = [macro_row(metrics, s) for s in ["baseline", *sources]]
    metrics = pd.concat([metrics, pd.DataFrame(macros, columns=METRIC_COLUMNS)],
                        ignore_index=True)
    for s in ["baseline", *sources]:  # macro baselines are means too
        base = metrics[(metrics["source"] == s) & (metrics["attribute"] != "macro average")]
        for col in ("prevalence", "majority_accuracy", "all_positive_f1"):
            metrics.loc[(metrics["source"] == s) & (metrics["attribute"] == "macro average"),
                        col] = float(base[col].mean()) if len(base) else np.nan
    write_parquet(metrics, a.out / "metrics.parquet", provenance=a.prov)
    metrics.to_csv(a.out / "metrics.csv", index=False, float_format="%.4f")
    return metrics


def _contradictions(a: _Audit, rules: Mapping[str, Mapping[str, Any]]
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-image rule flags and the per-rule table (a warning per rule not applied);
    writes rules.csv."""
    flags, rule_table = evaluate_rules(a.labels, rules)
    for _, r in rule_table[rule_table["status"] != "ok"].iterrows():
        log.warning("audit: rule %s not applied: %s", r["rule"], r["status"])
    rule_table.to_csv(a.out / "rules.csv", index=False, float_format="%.6f")
    return flags, rule_table


def _agreement(a: _Audit, sources: Mapping[str, pd.DataFrame]
               ) -> tuple[dict[str, float], list[dict[str, Any]], pd.DataFrame]:
    """Per attribute: Fleiss' kappa (identities x images), Cohen's kappa against every
    source (thresholded), Krippendorff's alpha across label and sources; and, for the
    invariant attributes, each image's leave-one-out disagreement with its identity.
    Returns the kappas, the agreement rows and the disagreements."""
    kappas, krows = {}, []
    id_dis = pd.DataFrame(index=a.idx)
    for attr in a.attrs:
        y = a.labels[attr].to_numpy()
        k, n_items, n_r = fleiss_kappa_by_group(y, a.identity)
        kappas[attr] = k
        row = {"attribute": attr, "invariant": attr in a.invariant, "fleiss_kappa": k,
               "n_identities": n_items, "n_images": n_r,
               "fleiss_status": "ok" if np.isfinite(k) else
               f"n/a ({n_items} identities with >= 2 images, or one class only)"}
        mats = [a.labels[attr].to_numpy(dtype=float)]
        for name, src in sources.items():
            if attr in src.columns:
                row[f"cohen_{name}"] = cohen_kappa(y, src[attr].to_numpy())
                p = src[attr].to_numpy(dtype=float)
                mats.append(np.where(np.isfinite(p),
                                     (p >= float(a.c["threshold"])).astype(float), np.nan)
                            if name != "second_source" else p)
        row["n_sources"] = len(mats)
        row["krippendorff_alpha"] = (krippendorff_alpha_nominal(np.stack(mats, axis=1))
                                     if len(mats) >= 2 else np.nan)
        krows.append(row)
        if attr in a.invariant:
            id_dis[attr] = leave_one_out_disagreement(y, a.identity)[0]
    return kappas, krows, id_dis


def _write_flags(a: _Audit, flags: pd.DataFrame, id_dis: pd.DataFrame) -> None:
    """flags.parquet: per image, its identity, the rule flags and, per invariant attribute,
    whether its label differs from most of its identity's other images."""
    flag_out = flags.reset_index(names="image_id")
    flag_out.insert(1, "identity", a.identity)
    for attr in id_dis.columns:
        flag_out[f"identity_disagree_{attr}"] = (id_dis[attr].to_numpy() > 0.5)
    write_parquet(flag_out, a.out / "flags.parquet", provenance=a.prov)


def _kappa_table(a: _Audit, krows: list[dict[str, Any]], metrics: pd.DataFrame,
                 sources: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The agreement rows with the F1 of the main source (``oof``, else the first) and
    ``reliable`` (what ``describe`` keeps: an invariant attribute needs Fleiss' kappa >=
    ``min_kappa``, any attribute with an F1 needs F1 >= ``min_f1``); writes kappa.csv and
    kappa.parquet."""
    kappa_table = pd.DataFrame(krows)
    f1_src = "oof" if "oof" in sources else next(iter(sources), None)
    f1 = metrics[(metrics["source"] == f1_src)].set_index("attribute")["f1"] if f1_src else None
    kappa_table["f1"] = [float(f1.get(x, np.nan)) if f1 is not None else np.nan
                         for x in a.attrs]
    kappa_table["reliable"] = [
        not ((r.invariant and not (r.fleiss_kappa >= float(a.c["min_kappa"])))
             or (np.isfinite(r.f1) and r.f1 < float(a.c["min_f1"])))
        for r in kappa_table.itertuples()]
    kappa_table.to_csv(a.out / "kappa.csv", index=False, float_format="%.4f")
    write_parquet(kappa_table, a.out / "kappa.parquet", provenance=a.prov)
    return kappa_table


def _suspects(a: _Audit, oof: pd.DataFrame | None, kappas: Mapping[str, float],
              flags: pd.DataFrame, rules: Mapping[str, Mapping[str, Any]],
              faces: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ranked suspect labels (model, identity and rule evidence) and identity-level
    suspects (with the out-of-fold model only); writes suspects.parquet, suspects_top.csv,
    identities.parquet and the thumbnail grid of the top ``grid_top`` per attribute."""
    suspects = rank_suspects(a.table["image_id"], a.identity, a.labels, oof, kappas,
                             a.invariant, flags,
                             {k: v for k, v in rules.items() if k in flags.columns},
                             a.c["weights"])
    write_parquet(suspects, a.out / "suspects.parquet", provenance=a.prov)
    suspects.head(200).to_csv(a.out / "suspects_top.csv", index=False, float_format="%.4f")
    ids = identity_suspects(a.identity, a.labels, oof, a.invariant) if oof is not None else \
        pd.DataFrame(columns=["attribute", "identity", "n_images", "share_positive",
                              "model_mean", "disagree", "score", "rank"])
    write_parquet(ids, a.out / "identities.parquet", provenance=a.prov)
    top = (suspects.groupby("attribute", sort=True).head(int(a.c["grid_top"])))
    suspects_grid(top, list(faces), a.out / "suspects_grid.png")
    return suspects, ids


def _skew_and_amplification(a: _Audit, oof: pd.DataFrame | None, id_dis: pd.DataFrame,
                            protected: Mapping[str, Any] | None
                            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Group skew per ``fairness.protected`` grouping (empty, with a warning, when the
    table has none of their columns) and label-vs-prediction phi per attribute pair
    (amplification = phi_pred - phi_label); writes group_skew.csv, phi.csv and phi.png."""
    from facecast.fairness.groups import image_labels, parse_specs

    specs = parse_specs(protected or {})
    usable = [s for s in specs if s.column in a.table.columns]
    if usable:
        g = image_labels(a.table, usable, [], sync="majority")
        groups = g[[s.name for s in usable] + (["group"] if len(usable) > 1 else [])]
        groups.index = a.idx
    else:
        groups = pd.DataFrame(index=a.idx)
        log.warning("audit: no fairness.protected column in the table; group skew is empty")
    skew = group_skew(groups, a.labels, oof, id_dis)
    skew.to_csv(a.out / "group_skew.csv", index=False, float_format="%.4f")
    phi_l = phi_matrix(a.labels)
    phi_rows = []
    phi_p = phi_matrix(oof) if oof is not None else None
    for i, x in enumerate(a.attrs):
        for y in a.attrs[i + 1:]:
            lv = float(phi_l.loc[x, y])
            pv = float(phi_p.loc[x, y]) if phi_p is not None else np.nan
            phi_rows.append({"a": x, "b": y, "phi_label": lv, "phi_pred": pv,
                             "amplification": pv - lv})
    phi = pd.DataFrame(phi_rows, columns=["a", "b", "phi_label", "phi_pred", "amplification"])
    phi.to_csv(a.out / "phi.csv", index=False, float_format="%.4f")
    phi_plot(phi_l, phi_p, a.out / "phi.png")
    return skew, phi


def _recovery(a: _Audit, suspects: pd.DataFrame, kappas: Mapping[str, float]) -> pd.DataFrame:
    """With ``truth_prefix`` (clean labels known, the synthetic demo): per attribute the
    actual flip rate, the expected kappa (1 - 2e)^2 and the suspect AUROC of the actual
    flips; writes recovery.csv (header only without truth)."""
    rec_rows = []
    if a.c["truth_prefix"]:
        for attr in a.attrs:
            tcol = a.c["truth_prefix"] + attr
            if tcol not in a.table.columns:
                continue
            t = a.table[tcol].to_numpy(dtype=float) >= 0.5
            y = a.labels[attr].to_numpy(dtype=float) >= 0.5
            flipped = t != y
            e = float(flipped.mean())
            sub = suspects[suspects["attribute"] == attr].set_index("image_id")["score"]
            sc = sub.reindex(a.idx).to_numpy(dtype=float)
            rec_rows.append({"attribute": attr, "flip_rate": e, "n_flipped": int(flipped.sum()),
                             "fleiss_kappa": kappas[attr], "expected_kappa": (1 - 2 * e) ** 2,
                             "suspect_auroc": _auroc(flipped, sc)})
    recovery = pd.DataFrame(rec_rows, columns=["attribute", "flip_rate", "n_flipped",
                                               "fleiss_kappa", "expected_kappa",
                                               "suspect_auroc"])
    recovery.to_csv(a.out / "recovery.csv", index=False, float_format="%.4f")
    return recovery
