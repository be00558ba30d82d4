"""FairFace 2020 metric, paper-literal by default: min_groups = 1 (a lone group gets d = 0)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from facecast.fairness.bias import discrimination, fairface_bias

ROOT = Path(__file__).parents[1]
POS = [("A", "X", 0.5), ("A", "X", 0.35), ("B", "X", 0.25), ("C", "X", 0.4),
       ("A", "Y", 0.05), ("B", "Y", 0.45)]
# C alone at Z, A alone at Y (negatives)
NEG = [("A", "X", 0.1), ("B", "X", 0.2), ("C", "X", 0.3), ("A", "Y", 0.4), ("C", "Z", 0.05)]


def _arrays():
    rows = [(*p, 1) for p in POS] + [(*n, 0) for n in NEG]
    g, c, s, y = (np.array(v, dtype=object) for v in zip(*rows, strict=True))
    n = len(rows)
    return s.astype(float), y.astype(int), g, c, np.ones(n, bool), np.ones(n, bool)


def test_default_is_the_papers_eq_3_4_a_lone_group_counts_with_d_zero():
    r = fairface_bias(*_arrays(), min_pairs=1)                     # the default
    cells = r.cells.set_index(["sign", "group", "combo"])
    # AUC-: X: A 5/6, B 5/6, C 4/6 -> d_C = 1/6; Z: C alone (5.5/6) -> d = 0, averaged in
    assert cells.loc[("-", "C", "Z"), "present"] and cells.loc[("-", "C", "Z"), "d"] == 0
    g = r.groups.set_index(["sign", "group"])["mean_d"]
    assert g[("-", "C")] == pytest.approx((1 / 6 + 0) / 2)
    assert r.bias_neg == pytest.approx(1 / 12)
    assert r.n_combos_used["-"] == 3


def test_min_groups_2_is_the_documented_deviation_leaving_lone_groups_out():
    r = fairface_bias(*_arrays(), min_pairs=1, min_groups=2)
    g = r.groups.set_index(["sign", "group"])["mean_d"]
    assert g[("-", "C")] == pytest.approx(1 / 6)
    assert r.bias_neg == pytest.approx(1 / 6)
    assert r.n_combos_used["-"] == 1


def test_discrimination_default_keeps_single_group_combinations():
    auc = np.array([[0.7, 0.5], [0.9, np.nan]])                    # combo 1: group 0 alone
    d, mean_d = discrimination(auc, np.isfinite(auc))
    assert d[0, 1] == 0.0
    np.testing.assert_allclose(mean_d, [(0.2 + 0.0) / 2, 0.0])
    _, mean_2 = discrimination(auc, np.isfinite(auc), min_groups=2)
    np.testing.assert_allclose(mean_2, [0.2, 0.0])


def test_schema_and_demo_config_default_to_one():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    prop = schema["properties"]["fairness"]["properties"]["min_groups"]
    assert prop["default"] == 1 and "deviation" in prop["description"]
    assert yaml.safe_load((ROOT / "config.yaml").read_text())["fairness"]["min_groups"] == 1
