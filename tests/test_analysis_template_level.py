"""Template-level attributes (issue 22): one aggregation for the analysis stage's template
attribute table and the templates stage's demographic groups - mean of numeric values,
majority of categorical ones (ties by label order, then text), every template with a
status - and the correlations / CAST subsets that read the table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.analysis.correlations import write_correlations
from facecast.analysis.stage import build_benchmark_subset, write_template_attributes
from facecast.analysis.targets import analysis_level, analysis_targets, attribute_table
from facecast.analysis.template_level import (
    aggregate_members,
    majority,
    table_level,
    template_attribute_table,
)
from facecast.fairness.groups import majority_vote
from facecast.io.parquet_io import read_metadata, read_parquet, read_provenance, write_parquet
from facecast.templates.groups import template_groups


def _members(rows: list[tuple[str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["image_id", "template_id"])


def _attributes() -> pd.DataFrame:
    """Five images: a, b ok; c missing (no face); d ok but excluded; e ok."""
    return pd.DataFrame({
        "image_id": ["a", "b", "c", "d", "e"],
        "identity": ["s1", "s1", "s2", "s2", "s3"],
        "split": ["test"] * 5,
        "exclude": [False, False, False, True, False],
        "status": ["ok", "landmarks_given", "missing", "ok", "ok"],
        "message": [""] * 5,
        "sharpness": [1.0, 4.0, np.nan, 9.0, 2.0],
        "label_gender": [1.0, 0.0, np.nan, 1.0, 1.0],
        "glasses": [True, True, False, False, False],
    })


def test_mean_skips_missing_values_and_non_voting_members():
    values = pd.DataFrame({"x": [1.0, np.nan, 5.0, 100.0, 7.0]})
    keys = np.array([1, 1, 1, 1, 2])
    voting = np.array([True, True, True, False, True])
    out = aggregate_members(values, keys, mean=["x"], voting=voting, index=[1, 2, 3])
    assert out["x"].iloc[:2].tolist() == [3.0, 7.0] and np.isnan(out["x"].iat[2])
    assert out["n_members"].tolist() == [4, 1, 0]
    assert out["n_voting"].tolist() == [3, 1, 0]


def test_majority_ties_go_to_the_label_order_then_the_text():
    labels = np.array(["dark", "light", "light", "dark", "x", None], dtype=object)
    keys = np.array([1, 1, 2, 2, 3, 4])
    won = majority(labels, keys, {"light": 0, "dark": 1})
    assert won.to_dict() == {1: "light", 2: "light", 3: "x"}  # key 4: no label, absent
    assert majority(labels, keys).to_dict() == {1: "dark", 2: "dark", 3: "x"}  # by text
    clear = majority(np.array(["b", "a", "b"], dtype=object), np.array([7, 7, 7]),
                     {"a": 0})
    assert clear.to_dict() == {7: "b"}  # the count wins before the order


def test_fairness_identity_sync_uses_the_same_vote():
    labels = pd.Series(["dark", "light", None, "light", "dark"])
    ident = pd.Series(["p", "p", "p", "q", "q"])
    synced = majority_vote(labels, ident, {"light": 0, "dark": 1}).tolist()
    won = majority(labels.to_numpy(object), ident.to_numpy(), {"light": 0, "dark": 1})
    assert synced == [won["p"]] * 3 + [won["q"]] * 2 == ["light"] * 5


def test_template_table_every_template_with_a_status():
    members = _members([("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 3), ("zz", 3),
                        ("zz", 4)])
    t = template_attribute_table(members, _attributes(), majority_columns=["label_*"])
    assert t["template_id"].tolist() == [1, 2, 3, 4]
    assert t["status"].tolist() == ["ok", "no_ok_image", "ok", "no_ok_image"]
    assert t["n_images"].tolist() == [2, 2, 2, 1] and t["n_voting"].tolist() == [2, 0, 1, 0]
    assert (t["level"] == "template").all() and not t["exclude"].any()
    assert t["message"].iat[1] == ("none of its images has usable attributes: missing=1, "
                                   "ok (excluded)=1")
    assert t["message"].iat[3].endswith("not_in_attributes=1") and t["message"].iat[0] == ""
    assert t["sharpness"].iat[0] == 2.5 and t["sharpness"].iat[2] == 2.0  # mean
    assert t[["sharpness", "label_gender"]].iloc[[1, 3]].isna().all().all()
    # label_gender by majority (tie 1 vs 0 -> "0.0" first as text), stays numeric
    assert t["label_gender"].tolist()[:3:2] == [0.0, 1.0]
    assert t["label_gender"].dtype == np.float64
    assert t["glasses"].tolist()[:3:2] == [True, False]  # booleans: majority
    assert t["identity"].tolist() == ["s1", "s2", "s3", "template_4"]
    # without majority_columns a numeric label is averaged
    mean = template_attribute_table(members, _attributes())
    assert mean["label_gender"].iat[0] == 0.5


def test_template_groups_are_the_same_aggregation():
    """The templates stage's groups: the mean of a binned attribute binned, the majority of
    a categorical one - the numbers of the template attribute table."""
    members = _members([("a", 1), ("b", 1), ("e", 3)])
    attrs = _attributes()
    protected = {"sharp": {"column": "sharpness", "bins": [2.2], "labels": ["soft", "sharp"]},
                 "gender": {"column": "label_gender", "values": {0: "f", 1: "m"},
                            "labels": ["m", "f"]}}
    groups = template_groups(members, attrs, protected)
    table = template_attribute_table(members, attrs)
    assert table["sharpness"].tolist() == [2.5, 2.0]
    assert groups["sharp"].tolist() == ["sharp", "soft"]
    assert groups["gender"].tolist() == ["m", "m"]  # tie f/m -> m, first in labels
    assert groups["group"].tolist() == ["sharp_m", "soft_m"]


def test_correlations_and_subset_over_templates(tmp_path):
    """The table written by the rule's entry is read by correlations and CAST filters at
    template level: provenance ``level``, a subset of ``ok`` templates."""
    rng = np.random.default_rng(0)
    n = 40
    names = [f"{k}.jpg" for k in range(2 * n)]
    tid = tmp_path / "ijbc_face_tid_mid.txt"
    tid.write_text("".join(f"{nm} {k // 2 + 1} {k}\n" for k, nm in enumerate(names))
                   + "gone.jpg 999 999\n")
    x = rng.normal(size=2 * n)
    attrs = pd.DataFrame({"image_id": [f"loose_crop/{nm}" for nm in names],
                          "identity": [f"s{k // 4}" for k in range(2 * n)],
                          "split": "test", "exclude": False,
                          "status": "landmarks_given", "message": "",
                          "x": x, "y": 2 * x + rng.normal(scale=0.1, size=2 * n),
                          "z": rng.normal(size=2 * n)})
    write_parquet(attrs, tmp_path / "attributes.parquet")
    out = tmp_path / "template_attributes.parquet"
    table = write_template_attributes(tid, tmp_path / "attributes.parquet", out,
                                      statuses=["ok"])
    assert len(table) == n + 1 and table_level(out) == "template"
    assert table.set_index("template_id").loc[999, "status"] == "no_ok_image"
    assert read_provenance(out)["n_no_ok_image"] == 1
    assert table_level(tmp_path / "attributes.parquet") == "image"

    cdir = tmp_path / "correlations"
    res = write_correlations(out, cdir, {"methods": ["pearson"], "min_abs_r": 0.5})
    pairs = read_parquet(cdir / "pearson_pairs.parquet")
    assert set(pairs["attr_a"]) | set(pairs["attr_b"]) == {"x", "y", "z"}  # no n_images
    assert (pairs["n"] == n).all()  # templates, not images; no_ok_image left out
    assert read_provenance(cdir / "pearson_pairs.parquet")["level"] == "template"
    assert res["pearson"][["attr_a", "attr_b"]].values.tolist() == [["x", "y"]]
    assert "Rows are IJB templates" in (cdir / "pearson_pairs_filtered.md").read_text()

    report = build_benchmark_subset(out, [{"attribute": "x", "mode": "rank", "low": 0.5,
                                           "high": 1.0}],
                                    tmp_path / "b/subset.parquet", tmp_path / "b/d.txt",
                                    bench="sharp", statuses=["ok"])
    sub = read_parquet(tmp_path / "b/subset.parquet")
    assert list(sub.columns) == ["template_id", "identity", "split", "n_images", "x"]
    assert report["level"] == "template" and report["n_pool"] == n
    assert len(sub) == n // 2 and 999 not in set(sub["template_id"])
    assert read_provenance(tmp_path / "b/subset.parquet")["level"] == "template"
    assert '"level": "template"' in read_metadata(tmp_path / "b/subset.parquet")[
        "facecast.subset_report"]


def test_targets_switch_only_ijb_datasets_to_templates(tmp_path):
    cfg = {"analysis": {"level": "template"},
           "datasets": {"ijbc": {"kind": "ijb", "root": str(tmp_path), "variant": "ijbc"},
                        "photos": {"kind": "folder", "root": str(tmp_path)}},
           "benchmarks": {"sharp": {"filters": []}}, "embed": {"models": {"lbp": {}}},
           "export": {"train_subsets": {"t": {"benchmark": "sharp"}}}}
    assert analysis_level(cfg, "ijbc") == "template"
    assert analysis_level(cfg, "photos") == "image"
    assert attribute_table(cfg, "ijbc") == "results/ijbc/template_attributes.parquet"
    ijb = analysis_targets(cfg, "ijbc")
    assert "results/ijbc/template_attributes.parquet" in ijb
    assert "results/ijbc/benchmarks/sharp/description.txt" in ijb
    assert not [t for t in ijb if t.endswith("pairs.parquet") and "benchmarks" in t]
    assert "results/photos/benchmarks/sharp/pairs.parquet" in analysis_targets(cfg, "photos")
    image = {**cfg, "analysis": {}}
    assert analysis_level(image, "ijbc") == "image"
    assert attribute_table(image, "ijbc") == "results/ijbc/attributes.parquet"


@pytest.mark.parametrize("datasets, n_errors", [({"d": {"kind": "folder"}}, 1),
                                                 ({"d": {"kind": "ijb"}}, 0)])
def test_template_level_needs_an_ijb_dataset(datasets, n_errors):
    from facecast.analysis.checks import level_errors

    errors = level_errors({"analysis": {"level": "template"}, "datasets": datasets})
    assert len(errors) == n_errors
    assert all(e.startswith("analysis.level") for e in errors)
