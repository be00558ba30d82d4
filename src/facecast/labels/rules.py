"""Contradiction rules over binary attribute labels (thesis Table 3.5 shape).

A rule is a mapping with ``kind``:

- ``exclusive``: ``attributes`` are mutually exclusive; an image violates the rule when
  two or more of them are 1 (Straight_Hair vs Wavy_Hair; more than one hair colour).
- ``conflicts``: ``attribute`` = 1 together with any of ``others`` = 1 (No_Beard vs
  {5_o_Clock_Shadow, Goatee, Mustache}).
- ``implies``: ``attribute`` = 1 requires at least one of ``others`` = 1 (Double_Chin
  without Chubby).

``soft: true`` marks a rule that flags a likely rather than certain error. A rule naming an
attribute the table lacks is reported with status ``n/a (missing ...)`` rather than failing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CELEBA_RULES", "DEMO_RULES", "RULE_SETS", "evaluate_rules", "rule_attributes",
           "rules_from_config", "validate_rules", "violates"]

CELEBA_RULES: dict[str, dict[str, Any]] = {
    "no_beard_vs_facial_hair": {"kind": "conflicts", "attribute": "No_Beard",
                                "others": ["5_o_Clock_Shadow", "Goatee", "Mustache"]},
    "straight_vs_wavy": {"kind": "exclusive", "attributes": ["Straight_Hair", "Wavy_Hair"]},
    "bald_vs_hair": {"kind": "conflicts", "attribute": "Bald",
                     "others": ["Bangs", "Receding_Hairline", "Straight_Hair", "Wavy_Hair"]},
    "hair_colours": {"kind": "exclusive",
                     "attributes": ["Black_Hair", "Blond_Hair", "Brown_Hair", "Gray_Hair"]},
    "double_chin_without_chubby": {"kind": "implies", "attribute": "Double_Chin",
                                   "others": ["Chubby"], "soft": True},
}
"""The shipped rule set for CelebA's 40 attribute names."""

DEMO_RULES: dict[str, dict[str, Any]] = {
    "bald_vs_long_hair": {"kind": "exclusive", "attributes": ["bald", "hair_long"]},
    "beard_implies_male": {"kind": "implies", "attribute": "beard", "others": ["male"]},
    "bald_implies_male": {"kind": "implies", "attribute": "bald", "others": ["male"],
                          "soft": True},
}
"""The rule set for the synthetic demo's labels."""

RULE_SETS = {"celeba": CELEBA_RULES, "demo": DEMO_RULES, "none": {}}
KINDS = ("exclusive", "conflicts", "implies")


def rules_from_config(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The shipped ``rule_set`` merged with the config's own ``rules`` (same name wins)."""
    name = str(cfg.get("rule_set", "none"))
    if name not in RULE_SETS:
        raise ValueError(f"audit.rule_set: unknown {name!r}; known: {sorted(RULE_SETS)}")
    out = {k: dict(v) for k, v in RULE_SETS[name].items()}
    out.update({k: dict(v) for k, v in (cfg.get("rules") or {}).items()})
    return out


def validate_rules(rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Problems with a rule mapping (each names the offending key)."""
    errs = []
    for name, r in rules.items():
        kind = r.get("kind")
        if kind not in KINDS:
            errs.append(f"audit.rules.{name}.kind: {kind!r} is not one of {list(KINDS)}")
        elif kind == "exclusive" and len(r.get("attributes") or []) < 2:
            errs.append(f"audit.rules.{name}.attributes: an exclusive rule needs >= 2")
        elif kind in ("conflicts", "implies") and (not r.get("attribute") or not r.get("others")):
            errs.append(f"audit.rules.{name}: a {kind} rule needs 'attribute' and 'others'")
    return errs


def rule_attributes(rule: Mapping[str, Any]) -> list[str]:
    """Every attribute a rule reads."""
    if rule["kind"] == "exclusive":
        return list(rule["attributes"])
    return [rule["attribute"], *rule["others"]]


def violates(row: Mapping[str, float], rule: Mapping[str, Any]) -> bool:
    """Whether one image's labels (attribute -> 0/1; absent = 0) break ``rule``."""
    def on(a: str) -> bool:
        return float(row.get(a, 0.0)) >= 0.5

    if rule["kind"] == "exclusive":
        return sum(on(a) for a in rule["attributes"]) >= 2
    if rule["kind"] == "conflicts":
        return on(rule["attribute"]) and any(on(a) for a in rule["others"])
    return on(rule["attribute"]) and not any(on(a) for a in rule["others"])


def evaluate_rules(labels: pd.DataFrame, rules: Mapping[str, Mapping[str, Any]]
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flag each image for each rule.

    ``labels``: one 0/1 column per attribute name (NaN = unlabelled), any index.
    Returns (flags, table): ``flags`` has one bool column per applicable rule (an image
    with a missing label in the rule counts as not violating) plus ``any_hard`` and
    ``any``; ``table`` one row per rule: rule, kind, soft, attributes, n, violations, rate,
    status.
    """
    flags = pd.DataFrame(index=labels.index)
    rows = []
    n = len(labels)
    for name, r in rules.items():
        attrs = rule_attributes(r)
        missing = [a for a in attrs if a not in labels.columns]
        soft = bool(r.get("soft", False))
        base = {"rule": name, "kind": r["kind"], "soft": soft, "attributes": ", ".join(attrs),
                "n": n}
        if missing:
            rows.append(base | {"violations": 0, "rate": float("nan"),
                                "status": f"n/a (missing {', '.join(missing)})"})
            continue
        v = {a: labels[a].to_numpy(dtype=float) >= 0.5 for a in attrs}
        if r["kind"] == "exclusive":
            bad = np.sum([v[a] for a in attrs], axis=0) >= 2
        elif r["kind"] == "conflicts":
            bad = v[r["attribute"]] & np.any([v[a] for a in r["others"]], axis=0)
        else:
            bad = v[r["attribute"]] & ~np.any([v[a] for a in r["others"]], axis=0)
        flags[name] = bad
        rows.append(base | {"violations": int(bad.sum()), "rate": float(bad.mean()) if n else
                            float("nan"), "status": "ok"})
    hard = [r for r in flags.columns if not rules[r].get("soft", False)]
    flags["any_hard"] = flags[hard].any(axis=1) if hard else False
    rule_cols = [c for c in flags.columns if c != "any_hard"]
    flags["any"] = flags[rule_cols].any(axis=1) if rule_cols else False
    table = pd.DataFrame(rows, columns=["rule", "kind", "soft", "attributes", "n",
                                        "violations", "rate", "status"])
    if n:
        for col, label in (("any_hard", "any hard rule"), ("any", "any rule")):
            table.loc[len(table)] = {"rule": label, "kind": "", "soft": col == "any",
                                     "attributes": "", "n": n,
                                     "violations": int(flags[col].sum()),
                                     "rate": float(flags[col].mean()), "status": "ok"}
    return flags, table
