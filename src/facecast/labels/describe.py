"""Stage ``describe``: rule-and-template face descriptions and their rater-free evaluation.

A description is built from a set of *facts*: binary attributes judged present (thresholded
probabilities; thresholds tuned for F1 on a validation split), the gender noun, and the
prominent landmark features. Grammar (exactly invertible by :func:`parse_description`)::

    A <noun>[ with <has-list>].[ <Pronoun> wears <wear-list>.]

``noun`` is man / woman (gender attribute kept) or person (dropped: pronoun "They"); the
has-list joins attribute phrases and merged feature phrases ("a wide, long nose"); lists
join with ", " and a final " and ". Seeded dropping removes each fact with probability
``drop_rate``. No description holds a contradictory pair: facts are checked against the
audit's contradiction rules and the less probable side is dropped.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.describe_eval import caption_verification, retrieval
from facecast.labels.features import PROMINENT_WORDS
from facecast.labels.html import write_html
from facecast.labels.metrics import best_f1_threshold
from facecast.labels.rules import rule_attributes, violates

__all__ = ["DEFAULT_PHRASES", "DESCRIBE_DEFAULTS", "Facts", "caption_verification",
           "compose", "describe_row", "parse_description", "resolve_contradictions",
           "retrieval", "run_describe"]

log = logging.getLogger(__name__)

#: attribute -> (phrase, verb): verb "has" joins the with-list, "wears" the wear-list
DEFAULT_PHRASES: dict[str, tuple[str, str]] = {
    "beard": ("a beard", "has"), "hair_long": ("long hair", "has"),
    "bald": ("a bald head", "has"), "glasses": ("glasses", "wears"), "hat": ("a hat", "wears"),
    "Eyeglasses": ("glasses", "wears"), "Wearing_Hat": ("a hat", "wears"),
    "Wearing_Earrings": ("earrings", "wears"), "Wearing_Necklace": ("a necklace", "wears"),
    "Wearing_Necktie": ("a necktie", "wears"), "Wearing_Lipstick": ("lipstick", "wears"),
    "Heavy_Makeup": ("heavy makeup", "wears"),
}

DESCRIBE_DEFAULTS: dict[str, Any] = {
    "enabled": False, "source": "audit", "columns": {}, "label_prefix": "",
    "oracle_prefix": "", "validation_split": "train", "drop_rate": 0.0,
    "gender_attribute": "male", "phrases": {}, "drop_unreliable": True,
    "gallery_size": 128, "n_pairs": 2000, "seed": None,
}

_PLURAL = {"eyes", "eyebrows", "lips"}
_PRONOUN = {"man": ("He", "wears"), "woman": ("She", "wears"), "person": ("They", "wear")}


class Facts(dict):
    """attribute -> True (present) plus ``gender`` -> "man"/"woman" and ``features`` set."""


def _phrases(cfg_phrases: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    out = dict(DEFAULT_PHRASES)
    for k, v in (cfg_phrases or {}).items():
        out[k] = (str(v["text"]), str(v.get("verb", "has"))) if isinstance(v, Mapping) \
            else (str(v), "has")
    return out


def _phrase(attr: str, phrases: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    return phrases.get(attr, (attr.replace("_", " ").lower(), "has"))


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _merge_features(features: Sequence[str]) -> list[str]:
    """"wide nose" + "long nose" -> "a wide, long nose" (adjectives in PROMINENT_WORDS order)."""
    order = [w for pair in PROMINENT_WORDS.values() for w in pair]
    by_noun: dict[str, list[str]] = {}
    for f in sorted(set(features), key=order.index):
        adj, noun = f.split(" ", 1)
        by_noun.setdefault(noun, []).append(adj)
    out = []
    for noun, adjs in by_noun.items():
        art = "" if noun in _PLURAL else ("an " if adjs[0][0] in "aeiou" else "a ")
        out.append(f"{art}{', '.join(adjs)} {noun}")
    return out


def compose(present: Sequence[str], gender: str | None, features: Sequence[str],
            phrases: Mapping[str, tuple[str, str]]) -> str:
    """The description of a fact set (attributes in the given order)."""
    noun = gender or "person"
    has = [_phrase(a, phrases)[0] for a in present if _phrase(a, phrases)[1] == "has"]
    has += _merge_features(features)
    wears = [_phrase(a, phrases)[0] for a in present if _phrase(a, phrases)[1] == "wears"]
    text = f"A {noun}" + (f" with {_join(has)}" if has else "") + "."
    if wears:
        pron, verb = _PRONOUN[noun]
        text += f" {pron} {verb} {_join(wears)}."
    return text


def parse_description(text: str, phrases: Mapping[str, tuple[str, str]],
                      attributes: Sequence[str]) -> tuple[set[str], str | None, set[str]]:
    """Invert :func:`compose`: (present attributes, gender or None, feature phrases)."""
    m = re.fullmatch(r"A (man|woman|person)(?: with (.*?))?\.(?: (He|She|They) wears? (.*)\.)?",
                     text)
    if not m:
        raise ValueError(f"not a facecast description: {text!r}")
    gender = None if m.group(1) == "person" else m.group(1)
    by_phrase = {_phrase(a, phrases)[0]: a for a in attributes}

    present: set[str] = set()
    feats: set[str] = set()
    items = _split_items(m.group(2) or "")
    for item in items:
        if item in by_phrase:
            present.add(by_phrase[item])
            continue
        words = re.sub(r"^(a|an) ", "", item).split(" ")
        noun = words[-1]
        adjs = " ".join(words[:-1]).split(", ")
        for adj in adjs:
            phrase = f"{adj} {noun}"
            if not any(phrase in pair for pair in PROMINENT_WORDS.values()):
                raise ValueError(f"unknown phrase {item!r} in {text!r}")
            feats.add(phrase)
    for item in _split_items(m.group(4) or ""):
        if item not in by_phrase:
            raise ValueError(f"unknown phrase {item!r} in {text!r}")
        present.add(by_phrase[item])
    return present, gender, feats


def _split_items(s: str) -> list[str]:
    """Split "x, y, a wide, long nose and z" into items (feature adjectives stay together)."""
    if not s:
        return []
    head, sep, last = s.rpartition(" and ")
    tokens = (head.split(", ") if sep else []) + [last if sep else s]
    if not sep:
        tokens = s.split(", ")
    items: list[str] = []
    adjectives = {w.split(" ")[0] for pair in PROMINENT_WORDS.values() for w in pair}
    for t in tokens:
        # a bare adjective continues a merged feature phrase: "a wide" + ", " + "long nose"
        if items and items[-1].split(" ")[-1] in adjectives and re.fullmatch(r"(a |an )?[a-z-]+",
                                                                               items[-1]):
            items[-1] = f"{items[-1]}, {t}"
        else:
            items.append(t)
    return items


def resolve_contradictions(present: list[str], probs: Mapping[str, float], gender: str | None,
                           gender_attr: str, rules: Mapping[str, Mapping[str, Any]]
                           ) -> list[str]:
    """Drop facts until no (hard or soft) rule is violated; the less probable side goes.

    Only stated facts can contradict: an ``implies`` rule whose consequence is not stated
    (e.g. gender dropped) is not checked.
    """
    present = list(present)
    for _ in range(len(present) + 1):
        row = dict.fromkeys(present, 1.0)
        if gender is not None:
            row[gender_attr] = 1.0 if gender == "man" else 0.0
        bad = [r for r in rules.values()
               if (r["kind"] != "implies" or set(r["others"]) <= set(row)) and violates(row, r)]
        if not bad:
            return present
        r = bad[0]
        if r["kind"] == "implies":
            victim = r["attribute"]
        else:
            involved = [a for a in rule_attributes(r) if a in present]
            victim = min(involved, key=lambda a: (probs.get(a, 0.0), a))
        present = [a for a in present if a != victim]
    return present


def describe_row(probs: Mapping[str, float], thresholds: Mapping[str, float],
                 features: Sequence[str], *, attributes: Sequence[str], gender_attr: str,
                 rules: Mapping[str, Mapping[str, Any]], phrases: Mapping[str, tuple[str, str]],
                 drop_rate: float, rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
    """One description and its fact set (present, gender, features)."""
    gender = None
    if gender_attr in probs and np.isfinite(probs[gender_attr]):
        gender = "man" if probs[gender_attr] >= thresholds.get(gender_attr, 0.5) else "woman"
    present = [a for a in attributes if a != gender_attr and np.isfinite(probs.get(a, np.nan))
               and probs[a] >= thresholds.get(a, 0.5)]
    feats = list(features)
    if drop_rate > 0:
        present = [a for a in present if rng.random() >= drop_rate]
        feats = [f for f in feats if rng.random() >= drop_rate]
        if gender is not None and rng.random() < drop_rate:
            gender = None
    present = resolve_contradictions(present, probs, gender, gender_attr, rules)
    text = compose(present, gender, feats, phrases)
    return text, {"present": sorted(present), "gender": gender, "features": sorted(feats)}


def _load_features(path: str | os.PathLike | None, key: str) -> dict[str, list[str]]:
    """``key`` -> its prominent feature phrases, from a features table ({} without one)."""
    if not path or not Path(path).exists():
        return {}
    t = read_parquet(path, columns=[key, "prominent"])
    return {str(k): [x for x in str(v).split(", ") if x] for k, v in
            zip(t[key], t["prominent"].fillna(""), strict=True)}


@dataclass(frozen=True)
class _Describer:
    """What every variant's descriptions need: the merged configs, the table, the audited
    attributes, their labels and reliability, grammar (phrases, rules) and features."""

    c: dict[str, Any]
    a_cfg: dict[str, Any]
    seed: int
    table: pd.DataFrame
    attrs: list[str]
    labels: pd.DataFrame
    reliable: dict[str, bool]
    identity: np.ndarray
    split: np.ndarray
    phrases: dict[str, tuple[str, str]]
    rules: dict[str, dict[str, Any]]
    f_img: dict[str, list[str]]
    f_id: dict[str, list[str]]

    @property
    def gattr(self) -> str:
        """The gender attribute (its noun: man / woman)."""
        return self.c["gender_attribute"]


def run_describe(attributes: str | os.PathLike, out_dir: str | os.PathLike,
                 cfg: Mapping[str, Any], audit_cfg: Mapping[str, Any], *,
                 predictions: str | os.PathLike | None = None,
                 kappa: str | os.PathLike | None = None,
                 features_images: str | os.PathLike | None = None,
                 features_identities: str | os.PathLike | None = None, seed: int = 0,
                 provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write descriptions.parquet, evaluation.csv and thresholds.csv under ``out_dir``."""
    c = DESCRIBE_DEFAULTS | dict(cfg or {})
    seed = int(c["seed"]) if c.get("seed") is not None else int(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d, variants = _describer(attributes, c, audit_cfg, seed, predictions, kappa,
                             features_images, features_identities)
    rows, evals, thr_rows = [], [], []
    for variant, (vp, keep) in variants.items():
        v_rows, v_evals, v_thr_rows = _describe_variant(d, variant, vp, keep)
        rows += v_rows
        evals += v_evals
        thr_rows += v_thr_rows
    desc = pd.DataFrame(rows)
    prov = dict(provenance or {}) | {"stage": "describe", "seed": seed}
    write_parquet(desc, out / "descriptions.parquet", provenance=prov)
    ev = pd.DataFrame(evals)
    ev.to_csv(out / "evaluation.csv", index=False, float_format="%.4f")
    pd.DataFrame(thr_rows).to_csv(out / "thresholds.csv", index=False, float_format="%.4f")
    examples = desc.groupby(["variant", "level"]).head(10)
    examples.to_csv(out / "examples.csv", index=False)
    write_html(out / "report.html", "Face descriptions", [
        ("Evaluation without raters", ev), ("Thresholds (F1-tuned on the validation split)",
                                            pd.DataFrame(thr_rows)),
        ("Examples", examples)])
    return {"n": len(desc), "evaluation": ev}


def _describer(attributes: str | os.PathLike, c: dict[str, Any], audit_cfg: Mapping[str, Any],
               seed: int, predictions: str | os.PathLike | None,
               kappa: str | os.PathLike | None,
               features_images: str | os.PathLike | None,
               features_identities: str | os.PathLike | None
               ) -> tuple[_Describer, dict[str, tuple[pd.DataFrame, set[str]]]]:
    """Read the attribute table; the audit's attributes and labels (``label_prefix``, else
    the audit's), the grammar, their reliability, the variants (:func:`_variants`) and the
    prominent features."""
    from facecast.labels.audit import binary_attributes, merged_cfg
    from facecast.labels.rules import rules_from_config

    a_cfg = merged_cfg(audit_cfg)
    table = read_parquet(attributes).reset_index(drop=True)
    table["image_id"] = table["image_id"].astype(str)
    prefix = c["label_prefix"] or a_cfg["label_prefix"]
    attrs = binary_attributes(table, prefix, a_cfg["attributes"])
    phrases = _phrases(c["phrases"])
    rules = rules_from_config(a_cfg)
    labels = pd.DataFrame({a: table[prefix + a].to_numpy(dtype=float) for a in attrs})
    reliable = _reliable(attrs, c, kappa)
    variants = _variants(c, table, attrs, labels, reliable, predictions)
    d = _Describer(
        c=c, a_cfg=a_cfg, seed=seed, table=table, attrs=attrs, labels=labels,
        reliable=reliable, identity=table["identity"].astype(str).to_numpy(),
        split=table["split"].astype(str).to_numpy() if "split" in table.columns else
        np.full(len(table), ""), phrases=phrases, rules=rules,
        f_img=_load_features(features_images, "image_id"),
        f_id=_load_features(features_identities, "identity"))
    return d, variants


def _reliable(attrs: Sequence[str], c: Mapping[str, Any],
              kappa: str | os.PathLike | None) -> dict[str, bool]:
    """Attribute -> reliable per the audit's kappa.csv (with ``drop_unreliable`` and when
    it exists; otherwise every attribute is reliable)."""
    reliable = {a: True for a in attrs}
    if c["drop_unreliable"] and kappa and Path(kappa).exists():
        k = pd.read_csv(kappa)
        if {"attribute", "reliable"} <= set(k.columns):
            k = k.set_index("attribute")
            reliable = {a: bool(k["reliable"].get(a, True)) for a in attrs}
    return reliable


def _variants(c: Mapping[str, Any], table: pd.DataFrame, attrs: Sequence[str],
              labels: pd.DataFrame, reliable: Mapping[str, bool],
              predictions: str | os.PathLike | None
              ) -> dict[str, tuple[pd.DataFrame, set[str]]]:
    """Variant -> (probabilities per attribute, attributes it may state): ``main`` from
    ``source`` (the audit's out-of-fold predictions, table columns or the labels; reliable
    attributes only) and, with ``oracle_prefix``, ``oracle`` (the clean labels, all)."""
    if c["source"] == "audit":
        pr = read_parquet(predictions) if predictions else pd.DataFrame()
        pr = pr.set_index(pr["image_id"].astype(str)) if len(pr) else pr
        probs = pd.DataFrame({a: pr[f"p_{a}"].reindex(table["image_id"]).to_numpy(dtype=float)
                              if f"p_{a}" in pr.columns else np.nan for a in attrs})
    elif c["source"] == "columns":
        probs = pd.DataFrame({a: table[col].to_numpy(dtype=float)
                              for a, col in (c["columns"] or {}).items()})
    elif c["source"] == "labels":
        probs = labels.copy()
    else:
        raise ValueError(f"describe.source must be audit, columns or labels, got {c['source']!r}")
    variants = {"main": (probs, {a for a in attrs if reliable[a]})}
    if c["oracle_prefix"]:
        variants["oracle"] = (pd.DataFrame({a: table[c["oracle_prefix"] + a].to_numpy(
            dtype=float) for a in attrs if c["oracle_prefix"] + a in table.columns}), set(attrs))
    return variants


def _describe_variant(d: _Describer, variant: str, vp: pd.DataFrame, keep: set[str]
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                 list[dict[str, Any]]]:
    """One variant: thresholds, a description per image, then per identity (one seeded
    stream for both, in that order), and the rater-free evaluation (logged). Returns the
    description rows, the evaluation rows and the threshold rows."""
    use = [a for a in d.attrs if a in keep and a in vp.columns]
    thr, thr_rows = _thresholds(d, variant, vp, use)
    rng = np.random.default_rng([d.seed, 14, 0 if variant == "main" else 1])
    pv = {a: vp[a].to_numpy(dtype=float) for a in use}
    rows, facts, caps, gonly, parse_ok = _describe_images(d, variant, use, pv, thr, rng)
    rows += _describe_identities(d, variant, use, pv, thr, rng)
    evals = _evaluate(d, variant, vp, use, facts, caps, gonly, parse_ok)
    auc = {e["metric"]: e["value"] for e in evals}
    log.info("describe[%s]: %d attributes kept (%s); verification AUC %.3f vs gender-only "
             "%.3f", variant, len(use), use, auc["verification_auc"],
             auc["verification_auc_gender_only"])
    return rows, evals, thr_rows


def _thresholds(d: _Describer, variant: str, vp: pd.DataFrame, use: Sequence[str]
                ) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Per used attribute the threshold: F1-tuned on the validation split for ``main``
    (unless the source is the labels or the split has < 10 images), else 0.5. Returns the
    thresholds and a row per attribute (NaN for those not used)."""
    thr, thr_rows = {}, []
    for a in use:
        val = d.split == str(d.c["validation_split"])
        if variant == "main" and d.c["source"] != "labels" and val.sum() >= 10:
            t, f1 = best_f1_threshold(d.labels[a].to_numpy()[val], vp[a].to_numpy()[val])
        else:
            t, f1 = 0.5, float("nan")
        thr[a] = t
        thr_rows.append({"variant": variant, "attribute": a, "threshold": t,
                         "validation_f1": f1, "reliable": d.reliable[a]})
    for a in d.attrs:
        if a not in use:
            thr_rows.append({"variant": variant, "attribute": a, "threshold": np.nan,
                             "validation_f1": np.nan, "reliable": d.reliable[a]})
    return thr, thr_rows


def _describe_images(d: _Describer, variant: str, use: Sequence[str],
                     pv: Mapping[str, np.ndarray], thr: Mapping[str, float],
                     rng: np.random.Generator
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str],
                                list[str], int]:
    """A description per image (table order, drawing on ``rng``), each parsed back.
    Returns the rows, the fact sets, the captions, gender-only captions and how many
    parsed back exactly."""
    rows, facts, caps, gonly = [], [], [], []
    parse_ok = 0
    image_id = d.table["image_id"]
    for i in range(len(d.table)):
        pi = {a: pv[a][i] for a in use}
        text, f = describe_row(pi, thr, d.f_img.get(image_id[i], []), attributes=use,
                               gender_attr=d.gattr, rules=d.rules, phrases=d.phrases,
                               drop_rate=float(d.c["drop_rate"]), rng=rng)
        back = parse_description(text, d.phrases, use)
        parse_ok += back == (set(f["present"]), f["gender"], set(f["features"]))
        facts.append(f)
        caps.append(text)
        gonly.append(compose([], f["gender"], [], d.phrases))
        rows.append(_row(variant, "image", image_id[i], d.identity[i], text, f))
    return rows, facts, caps, gonly, parse_ok


def _describe_identities(d: _Describer, variant: str, use: Sequence[str],
                         pv: Mapping[str, np.ndarray], thr: Mapping[str, float],
                         rng: np.random.Generator) -> list[dict[str, Any]]:
    """A description per identity (sorted): the majority vote of its images' thresholded
    predictions of the invariant attributes (drawing on ``rng``)."""
    inv = [a for a in use if a in d.a_cfg["invariant"]]
    votes = pd.DataFrame({a: (pv[a] >= thr[a]).astype(float) for a in inv})
    votes = votes.where(pd.DataFrame({a: np.isfinite(pv[a]) for a in inv}))
    votes["identity"] = d.identity
    maj = votes.groupby("identity").mean()
    rows = []
    for ident, r in maj.iterrows():
        pi = {a: (1.0 if r[a] > 0.5 else 0.0) if np.isfinite(r[a]) else np.nan for a in inv}
        text, f = describe_row(pi, dict.fromkeys(inv, 0.5), d.f_id.get(ident, []),
                               attributes=inv, gender_attr=d.gattr, rules=d.rules,
                               phrases=d.phrases, drop_rate=float(d.c["drop_rate"]), rng=rng)
        rows.append(_row(variant, "identity", ident, ident, text, f))
    return rows


def _row(variant: str, level: str, key: str, identity: str, text: str,
         f: Mapping[str, Any]) -> dict[str, Any]:
    """One descriptions.parquet row."""
    return {"variant": variant, "level": level, "key": key, "identity": identity,
            "description": text, "attributes": ", ".join(f["present"]),
            "gender": f["gender"] or "", "features": ", ".join(f["features"])}


def _evaluate(d: _Describer, variant: str, vp: pd.DataFrame, use: Sequence[str],
              facts: Sequence[dict[str, Any]], caps: Sequence[str], gonly: Sequence[str],
              parse_ok: int) -> list[dict[str, Any]]:
    """The rater-free evaluation rows: round trip, caption verification AUC (against
    gender-only and constant captions) and caption-to-image retrieval top-1/top-10."""
    n_pairs = int(d.c["n_pairs"])
    ids_s = pd.Series(d.identity)
    ver = caption_verification(pd.Series(caps), ids_s, d.seed, n_pairs)
    ver_g = caption_verification(pd.Series(gonly), ids_s, d.seed, n_pairs)
    ver_c = caption_verification(pd.Series(["A person."] * len(caps)), ids_s, d.seed, n_pairs)
    ret = retrieval(facts, vp[use] if use else pd.DataFrame(index=vp.index),
                    [set(d.f_img.get(x, [])) for x in d.table["image_id"]], d.identity,
                    d.gattr, int(d.c["gallery_size"]), d.seed)
    return [
        {"variant": variant, "metric": "round_trip_exact", "value": parse_ok / max(len(caps), 1),
         "baseline": np.nan, "status": "ok"},
        {"variant": variant, "metric": "verification_auc", "value": ver["auc"],
         "baseline": np.nan, "status": ver["status"]},
        {"variant": variant, "metric": "verification_auc_gender_only",
         "value": ver_g["auc"], "baseline": np.nan, "status": ver_g["status"]},
        {"variant": variant, "metric": "verification_auc_constant", "value": ver_c["auc"],
         "baseline": np.nan, "status": ver_c["status"]},
        {"variant": variant, "metric": "retrieval_top1", "value": ret["top1"],
         "baseline": ret.get("chance_top1", np.nan), "status": ret["status"]},
        {"variant": variant, "metric": "retrieval_top10", "value": ret["top10"],
         "baseline": ret.get("chance_top10", np.nan), "status": ret["status"]},
    ]
