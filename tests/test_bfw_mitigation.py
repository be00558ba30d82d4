"""Mitigation on BFW's score columns (issue 41, item 2): models without images get the
score-level methods (raw, oracle calibration, group thresholds, fusion of the datatable's
columns), their embedding methods are table rows that say n/a, the rule asks for no
embedding, and slices / compare read a score column's mitigated scores (``vgg16+fusion``).
One small Snakemake run on tests/data/bfw (no image is read)."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, TEST_DATA, run_snakemake

from facecast.config.check import collect
from facecast.config.prepare import resolve_config
from facecast.evaluate.targets import score_model_regex
from facecast.io.parquet_io import read_parquet
from facecast.mitigation import targets as mt
from facecast.mitigation.stage import run_mitigation
from facecast.mitigation.table import add_unavailable
from facecast.mitigation.targets import EMBEDDING_METHODS, METHODS, SCORE_ONLY_NOTE

TABLE = TEST_DATA / "bfw" / "bfw-v0.1.5-datatable.csv"
SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")
SCORE_LEVEL = ["raw", "oracle_cal", "group_thresholds", "fusion", "fusion_lr"]


def _config(**sections) -> tuple[dict, list[str]]:
    """A BFW dataset read without images (tests/data/bfw), mitigation on; resolved as the
    Snakefile does -> (config, plan lines)."""
    cfg = {"datasets": {"bfw": {"kind": "bfw", "table": str(TABLE)}},
           "embed": {"models": {}}, "mitigation": {"enabled": True}}
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **copy.deepcopy(value)}
    plan = resolve_config(cfg, SCHEMA)
    return cfg, plan


def test_score_columns_get_the_score_level_methods_and_no_embedding_input():
    cfg, plan = _config()
    assert mt.models(cfg) == ["vgg16", "resnet50", "senet50", "sphereface"]
    assert mt.methods(cfg, "vgg16") == list(METHODS)          # the table's rows
    assert mt.run_methods(cfg, "vgg16") == SCORE_LEVEL          # what runs
    assert mt.unavailable(cfg, "vgg16") == {m: SCORE_ONLY_NOTE for m in EMBEDDING_METHODS}
    assert mt.method_files(cfg, score=True) == [f"{m}/pairs.parquet" for m in SCORE_LEVEL]
    inputs = mt.rule_inputs(cfg, "bfw", "vgg16", "bfw")
    assert "embeddings" not in inputs and "cal_embeddings" not in inputs
    assert inputs["partners"] == [f"results/bfw/eval/{m}/bfw.parquet"
                                  for m in ("resnet50", "senet50", "sphereface")]
    assert mt.targets(cfg, "bfw") == [f"results/bfw/mitigation/{m}/bfw/table.md"
                                      for m in mt.models(cfg)]
    assert collect(cfg)[0] == []
    assert any(line.startswith("mitigation: znorm, tnorm, ztnorm, snorm, asnorm, fsn, "
                               "faircal n/a on the BFW score columns vgg16, resnet50")
               for line in plan), plan
    # the two rules never claim one another's files
    path = "results/bfw/mitigation/{}/bfw/table.md"

    def rule(constraint: str) -> re.Pattern:  # as Snakemake wraps a wildcard constraint
        return re.compile(r"results/bfw/mitigation/(?P<model>" + constraint
                          + r")/bfw/table\.md")

    embed_rule, score_rule = rule(mt.embed_model_regex(cfg)), rule(score_model_regex(cfg))
    assert not embed_rule.fullmatch(path.format("vgg16")) and embed_rule.fullmatch(
        path.format("vgg16x"))
    assert score_rule.fullmatch(path.format("vgg16")) and not score_rule.fullmatch(
        path.format("dlib"))


def test_on_by_default_on_a_datatable_of_enough_identities(tmp_path):
    """Left out, mitigation follows the identities of the split (``id1``/``id2``): 128
    people run it on the score columns with no embed model, where it was skipped."""
    csv = pd.read_csv(TABLE, index_col=0)
    big = pd.concat([csv.assign(id1=csv["id1"] + 32 * k, id2=csv["id2"] + 32 * k)
                     for k in range(4)], ignore_index=True)
    big.to_csv(tmp_path / "t.csv")
    cfg = {"datasets": {"bfw": {"kind": "bfw", "table": str(tmp_path / "t.csv")}},
           "embed": {"models": {}}}
    plan = resolve_config(cfg, SCHEMA)
    assert any(line.startswith("mitigation: on for bfw") and "128 identities" in line
               for line in plan), plan
    assert not any("skipped" in line for line in plan if line.startswith("mitigation"))
    assert mt.targets(cfg, "bfw") == [f"results/bfw/mitigation/{m}/bfw/table.md"
                                      for m in ("vgg16", "resnet50", "senet50", "sphereface")]


def test_one_score_column_cannot_fuse_and_the_plan_says_so():
    cfg, plan = _config(datasets={"bfw": {"kind": "bfw", "table": str(TABLE),
                                          "scores": ["vgg16"]}})
    assert mt.run_methods(cfg, "vgg16") == ["raw", "oracle_cal", "group_thresholds"]
    assert mt.rule_inputs(cfg, "bfw", "vgg16", "bfw")["partners"] == []
    assert ("mitigation: fusion left out on BFW score columns - needs two or more score "
            "columns in each BFW datatable (datasets.<ds>.scores)") in plan


@pytest.mark.parametrize("sections, words", [
    ({"compare": {"models": ["vgg16", "vgg16+fsn"]}},
     "compare.models: 'vgg16+fsn': 'vgg16' is a BFW score column and 'fsn' needs "
     "embeddings"),
    ({"mitigation": {"methods": ["faircal"]}},
     "mitigation.methods: 'faircal' needs embeddings; every model of the stage is a BFW "
     "score column"),
    ({"mitigation": {"calibration": {"benchmark": "lfw"}}},
     "mitigation.calibration: the BFW score column 'vgg16' has no scored pairs on 'lfw'"),
])
def test_what_a_score_column_cannot_do_is_a_config_error(sections, words):
    cfg, _ = _config(**sections)
    errs = collect(cfg)[0]
    assert any(e.startswith(words) for e in errs), errs
    fine, _ = _config(compare={"models": ["vgg16", "vgg16+fusion"]},
                      slices={"models": ["vgg16+group_thresholds"]})
    assert collect(fine)[0] == []


def test_unavailable_rows_are_nan_with_their_note_in_method_order():
    table = pd.DataFrame({"method": ["raw", "fusion"], "status": "ok", "n_pairs": 9,
                          "n_genuine": 4, "n_impostors": 5, "n_identities": 6,
                          "auc": [0.9, 0.95], "threshold": [0.3, 0.1], "note": ""})
    diff = pd.DataFrame({"method": ["fusion"], "metric": ["auc"], "value": [0.95],
                         "raw": [0.9], "difference": [0.05], "p": [0.01],
                         "p_adjusted": [0.01], "significant": [True], "verdict": ["higher"],
                         "better": pd.array([True], dtype="boolean"), "note": [""],
                         "n_boot": [8]})
    wide, long = add_unavailable(table, diff, {"fsn": SCORE_ONLY_NOTE},
                                 metrics=["auc", "threshold"], order=METHODS)
    assert wide["method"].tolist() == ["raw", "fsn", "fusion"]
    row = wide.set_index("method").loc["fsn"]
    assert row["status"] == "n/a" and row["note"] == SCORE_ONLY_NOTE
    assert np.isnan(row["auc"]) and row["n_pairs"] == 9
    fsn = long[long["method"] == "fsn"]
    assert fsn["metric"].tolist() == ["auc"]  # the threshold is never tested
    assert fsn["verdict"].iat[0] == SCORE_ONLY_NOTE and fsn["raw"].iat[0] == 0.9
    assert np.isnan(fsn["p"].iat[0]) and not fsn["significant"].iat[0]
    assert long["method"].tolist() == ["fsn", "fusion"]


def test_score_only_run_mitigates_and_slices_compare_read_it(tmp_path):
    """tests/data/bfw without images, two score columns: the default DAG schedules
    mitigation, slices and compare on them and no image job; a run writes the score-level
    methods (split by identity) with n/a rows, and compare / slices read ``+<method>``."""
    base = {"datasets": {"bfw": {"kind": "bfw", "table": str(TABLE),
                                 "scores": ["vgg16", "resnet50"]}},
            "embed": {"models": {}}, "fairness": {"thresholds": {"fmr_targets": [0.1]}},
            "mitigation": {"enabled": True, "n_boot": 20, "fmr": 0.1},
            "compare": {"n_boot": 20}}
    dry = run_snakemake(tmp_path, base, extra=["-n", "--quiet", "rules"]).stdout
    counts = {p[0]: int(p[1]) for p in (line.split() for line in dry.splitlines())
              if len(p) == 2 and p[1].isdigit()}
    assert counts["mitigation_scores"] == counts["slices"] == 2 and counts["compare"] == 1
    assert not {"mitigation", "embed", "faces", "embed_index"} & set(counts)
    cfg = {**base, "compare": {"n_boot": 20, "models": ["vgg16", "vgg16+fusion"]},
           "slices": {"models": ["vgg16+group_thresholds"]}}
    run_snakemake(tmp_path, cfg, ["results/bfw/compare/leaderboard.md",
                                  "results/bfw/slices/vgg16+group_thresholds/bfw/"
                                  "discovered.yaml"])
    out = tmp_path / "results/bfw/mitigation/vgg16/bfw"
    table = read_parquet(out / "table.parquet").set_index("method")
    assert table.index.tolist() == list(METHODS)
    na = table.loc[list(EMBEDDING_METHODS)]
    assert (na["status"] == "n/a").all() and (na["note"] == SCORE_ONLY_NOTE).all()
    assert na["accuracy"].isna().all() and na["auc"].isna().all()
    assert (table.loc[SCORE_LEVEL, "status"] == "ok").all()
    assert np.isfinite(table.loc[SCORE_LEVEL, "auc"]).all()
    assert sorted(p.parent.name for p in out.glob("*/pairs.parquet")) == sorted(SCORE_LEVEL)
    # the datatable's two folds share no identity: cross-fitted over them (each fold
    # scored by the fit that learned on the other), no pair lost
    split = read_parquet(out / "split.parquet")
    assert (split["status"] == "evaluated").all() and (split["fit"] == split["fold"]).all()
    fits = read_parquet(out / "fits.parquet")
    assert fits[["fit", "excluded", "n_calibration", "n_evaluated", "n_left_out"]].to_dict(
        "list") == {"fit": ["1", "2"], "excluded": ["1", "2"], "n_calibration": [120, 120],
                    "n_evaluated": [120, 120], "n_left_out": [0, 0]}
    assert table["n_pairs"].tolist() == [240] * len(table) and (table["n_fits"] == 2).all()
    learned = json.loads((out / "learned.json").read_text())
    assert [f["fusion"]["models"] for f in learned["fits"]] == [["resnet50", "vgg16"]] * 2
    assert f"fsn: {SCORE_ONLY_NOTE}" in learned["notes"]
    log = (tmp_path / "results/bfw/logs/mitigation/vgg16_bfw.log").read_text()
    assert f"faircal: {SCORE_ONLY_NOTE} - not computed on vgg16" in log
    assert "\n- `fsn`: n/a (score-only model: needs embeddings).\n" in (
        out / "table.md").read_text()
    # the score-level rows are what the same job gives without n/a rows
    inputs = {"scores": str(tmp_path / "results/bfw/eval/vgg16/bfw.parquet"),
              "attributes": str(tmp_path / "results/bfw/attributes.parquet"),
              "partners": [str(tmp_path / "results/bfw/eval/resnet50/bfw.parquet")]}
    resolved, _ = _config(**{k: v for k, v in cfg.items() if k != "datasets"},
                          datasets=cfg["datasets"])
    alone = run_mitigation(inputs, tmp_path / "alone", resolved["mitigation"],
                           mt.fairness_section(resolved), methods=SCORE_LEVEL,
                           partners=["resnet50"], fars=resolved["evaluate"]["fars"],
                           seed=resolved["seed"], model="vgg16", protocol="bfw", ds="bfw")
    pd.testing.assert_frame_equal(alone.set_index("method"), table.loc[SCORE_LEVEL],
                                  check_dtype=False)
    # compare and slices read the mitigated score column from the mitigation stage
    fused = read_parquet(out / "fusion/pairs.parquet")
    diff = read_parquet(tmp_path / "results/bfw/compare/differences.parquet")
    assert set(diff["model_a"]) | set(diff["model_b"]) == {"vgg16", "vgg16+fusion"}
    assert (diff["n_pairs"] == len(fused)).all()
    assert (tmp_path / "results/bfw/slices/vgg16+group_thresholds/bfw/report.html").is_file()
    assert not list(tmp_path.glob("results/bfw/embed*")) and not list(
        tmp_path.glob("results/bfw/faces*"))
