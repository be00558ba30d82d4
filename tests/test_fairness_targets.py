"""Which fairness outputs a config asks for (the rule file's input functions)."""

from facecast.fairness import targets

GENDER = {"gender": {"column": "age_gender_male", "bins": [0.5]}}


def test_defaults_follow_the_evaluate_section():
    cfg = {"datasets": {"demo": {"kind": "synthetic"}}, "benchmarks": {"random": {}},
           "evaluate": {"models": ["lbp", "dlib"], "benchmarks": ["random"]},
           "fairness": {"models": [], "protocols": [], "imports": {}, "protected": GENDER}}
    assert targets.protocols(cfg) == ["random"]
    assert targets.models(cfg, "random") == ["lbp", "dlib"]
    assert targets.models(cfg, "other") == []
    assert targets.targets(cfg, "demo", ["demo"]) == [
        "results/demo/fairness/lbp/random/report.md",
        "results/demo/fairness/dlib/random/report.md",
        "results/demo/fairness/leaderboard/random/leaderboard.md"]
    # no protected attribute: nothing to assess (the run plan says why)
    cfg["fairness"]["protected"] = {}
    assert targets.targets(cfg, "demo", ["demo"]) == []


def test_imports_join_their_protocol_and_datasets_filter():
    cfg = {"datasets": {"demo": {"kind": "synthetic"}, "lfw": {"kind": "folder"}},
           "evaluate": {"models": {"lbp": {}}},
           "fairness": {"protocols": ["p"], "datasets": ["demo"], "protected": GENDER,
                        "imports": {"ext": {"predictions": "a.csv", "pairs": "b.csv",
                                            "protocol": "p"},
                                    "chal": {"predictions": "c.csv", "pairs": "d.csv"}}}}
    assert targets.models(cfg, "p") == ["lbp", "ext"]
    assert targets.models(cfg, "challenge") == ["chal"]
    assert targets.scores_path(cfg, "demo", "ext", "p") == (
        "results/demo/fairness/imported/ext/p.parquet")
    assert targets.scores_path(cfg, "demo", "lbp", "p") == "results/demo/eval/lbp/p.parquet"
    assert "results/demo/fairness/chal/challenge/report.md" in targets.targets(
        cfg, "demo", ["demo", "lfw"])
    assert targets.targets(cfg, "lfw", ["demo", "lfw"]) == []


def test_rule_inputs():
    cfg = {"fairness": {"hard_pairs_source": "faces",
                        "thresholds": {"from_protocol": "dev"}}}
    got = targets.rule_inputs(cfg, "demo", "lbp", "test")
    assert got["faces"] == "results/demo/index/faces.parquet"
    assert got["thresholds"] == "results/demo/fairness/lbp/dev/thresholds.parquet"
    assert "thresholds" not in targets.rule_inputs(cfg, "demo", "lbp", "dev")
    cfg["fairness"]["hard_pairs_source"] = "dataset"
    assert "faces" not in targets.rule_inputs(cfg, "demo", "lbp", "dev")
