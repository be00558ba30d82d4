"""Config checks and targets for pre-aligned / RecordIO / .bin inputs (issue 12)."""

from __future__ import annotations

import pytest

from facecast.analysis.checks import fill_defaults
from facecast.analysis.targets import analysis_targets
from facecast.config.bin_sets import CC11_NAMES
from facecast.config.util import protocol_names
from facecast.covariates.targets import targets as covariates_targets
from facecast.datasets.checks import config_errors
from facecast.evaluate.targets import eval_benchmarks, protocol_path, protocol_spec
from facecast.fairness.targets import demographics_targets
from facecast.identification.targets import targets as identification_targets
from facecast.quality.targets import targets as quality_targets


def _cfg(tmp_path, **over):
    (tmp_path / "train.rec").write_bytes(b"")
    (tmp_path / "train.idx").write_text("")
    (tmp_path / "lfw.bin").write_bytes(b"")
    cfg = {
        "datasets": {
            "web": {"kind": "recordio", "rec": str(tmp_path / "train.rec")},
            "lfwb": {"kind": "insightface_bin", "path": str(tmp_path / "lfw.bin")},
        },
        "faces": {"detector": "none"},
        "mining": {"statuses": ["ok", "aligned_input"]},
        "embed": {"models": {"lbp": {"backend": "lbp"}}},
        "evaluate": {"imports": {"lfw": {"format": "insightface_bin",
                                         "path": str(tmp_path / "lfw.bin")}}},
    }
    cfg.update(over)
    return cfg


def test_a_good_config_passes(tmp_path):
    assert config_errors(_cfg(tmp_path)) == []


def test_mistakes_are_named_by_key(tmp_path):
    cfg = _cfg(tmp_path)
    (tmp_path / "train.idx").unlink()
    cfg["datasets"]["lfwb"]["exclude_by"] = "record"
    cfg["mining"]["statuses"] = ["ok"]
    cfg["evaluate"]["imports"]["lfw"]["datasets"] = ["web"]
    errors = config_errors(cfg)
    assert any(e.startswith("datasets.web.idx: RecordIO index") for e in errors)
    assert any(e.startswith("datasets.lfwb.exclude_by: 'record' needs kind recordio")
               for e in errors)
    assert any(e.startswith("mining.statuses: faces.detector is none") for e in errors)
    assert any(e.startswith("evaluate.imports.lfw.datasets: web is not") for e in errors)
    cfg = _cfg(tmp_path)
    cfg["datasets"].pop("lfwb")
    assert any(e.startswith("evaluate.imports.lfw: no dataset of kind insightface_bin")
               for e in config_errors(cfg))


def test_bin_import_applies_to_its_own_dataset_only(tmp_path):
    cfg = _cfg(tmp_path)
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]
    assert eval_benchmarks(cfg, "web") == []


def test_no_benchmarks_are_mined_from_a_bin_dataset(tmp_path):
    cfg = _cfg(tmp_path, benchmarks={"random": {"filters": []}})
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]
    assert eval_benchmarks(cfg, "web") == ["random"]
    assert not any("benchmarks/" in t for t in analysis_targets(cfg, "lfwb"))
    assert any("benchmarks/random" in t for t in analysis_targets(cfg, "web"))
    cfg["evaluate"]["benchmarks"] = ["random", "lfw"]
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]


# ------------------------------------------------ a .bin dataset implies its protocol


def _mixed(tmp_path):
    """A RecordIO training set, lfw.bin and a CC11 .bin in one config, no imports, every
    later stage that assesses protocols on (quality, demographics, covariates)."""
    cfg = _cfg(tmp_path)
    (tmp_path / "cc11_val.bin").write_bytes(b"")
    cfg["datasets"]["cc"] = {"kind": "insightface_bin", "path": str(tmp_path / "cc11_val.bin"),
                             "layout": "cc11"}
    cfg["evaluate"] = {"models": ["lbp"]}
    cfg["benchmarks"] = {"random": {"filters": []}}
    cfg["fairness"] = {"protected": {"gender": {"column": "age_gender_male", "bins": [0.5],
                                                "labels": ["f", "m"]}}}
    cfg["covariates"] = {"enabled": True, "covariates": ["luminance_mean"]}
    return cfg


def test_each_bin_dataset_is_evaluated_on_its_own_pairs(tmp_path):
    cfg = _mixed(tmp_path)
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]
    assert eval_benchmarks(cfg, "cc") == list(CC11_NAMES)
    assert eval_benchmarks(cfg, "web") == ["random"]
    assert protocol_path(cfg, "lfwb", "lfw") == "results/lfwb/protocols/lfw.parquet"
    assert protocol_path(cfg, "cc", "random") == "results/cc/protocols/random.parquet"
    assert protocol_path(cfg, "web", "random") == "results/web/benchmarks/random/pairs.parquet"
    assert protocol_spec(cfg, "cc", "latinx") == {
        "format": "insightface_bin", "path": str(tmp_path / "cc11_val.bin"), "layout": "cc11",
        "block": 3}
    assert protocol_spec(cfg, "lfwb", "lfw")["layout"] == "pairs"
    with pytest.raises(ValueError, match="'lfw' does not apply to dataset 'web'"):
        protocol_spec(cfg, "web", "lfw")
    assert "lfw" in protocol_names(cfg) and "low_p2p" in protocol_names(cfg)


def test_later_stages_never_pair_a_protocol_with_a_dataset_it_cannot_resolve(tmp_path):
    """The RecordIO + lfw.bin crash: quality / demographics / covariates asked for the .bin
    protocol on the RecordIO dataset (import_protocol: "no pair resolves") and for mined
    benchmarks on the .bin dataset."""
    cfg = _mixed(tmp_path)
    expect = {"web": {"random"}, "lfwb": {"lfw"}, "cc": set(CC11_NAMES)}  # cc's own random
    for ds, protos in expect.items():
        for outs in (quality_targets(cfg, ds), demographics_targets(cfg, ds),
                     covariates_targets(cfg, ds, list(cfg["datasets"]))):
            # results/<ds>/<section>/<model>/<protocol>/<file>
            assert {o.split("/")[4] for o in outs} == protos, (ds, outs)
    assert identification_targets(cfg, "lfwb") == identification_targets(cfg, "cc") == []


def test_a_bin_import_keeps_its_name_and_replaces_the_implied_protocol(tmp_path):
    cfg = _cfg(tmp_path)  # evaluate.imports.lfw of lfw.bin (configs before implied protocols)
    cfg["evaluate"]["imports"] = {"lfwbin": cfg["evaluate"]["imports"]["lfw"]}
    assert eval_benchmarks(cfg, "lfwb") == ["lfwbin"]
    assert protocol_spec(cfg, "lfwb", "lfwbin")["path"] == str(tmp_path / "lfw.bin")
    cfg["evaluate"]["imports"]["lfwbin"]["datasets"] = ["web"]  # applies elsewhere: implied
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]


def test_a_non_bin_import_does_not_apply_to_bin_datasets(tmp_path):
    cfg = _cfg(tmp_path)
    (tmp_path / "c11").mkdir()
    cfg["evaluate"]["imports"] = {"c11": {"format": "cast_lists", "path": str(tmp_path / "c11")}}
    assert eval_benchmarks(cfg, "web") == ["c11"]
    assert eval_benchmarks(cfg, "lfwb") == ["lfw"]


def test_layout_and_stem_mistakes_are_named_by_key(tmp_path):
    cfg = _cfg(tmp_path)
    cfg["datasets"]["web"]["layout"] = "cc11"
    (tmp_path / "pairs.bin").write_bytes(b"")
    cfg["datasets"]["p"] = {"kind": "insightface_bin", "path": str(tmp_path / "pairs.bin")}
    (tmp_path / "my lfw.bin").write_bytes(b"")
    cfg["datasets"]["q"] = {"kind": "insightface_bin", "path": str(tmp_path / "my lfw.bin")}
    errors = config_errors(cfg)
    assert any(e.startswith("datasets.web.layout: 'cc11' needs kind insightface_bin")
               for e in errors)
    assert any(e.startswith("datasets.p.path: the protocol of a .bin is named after its file "
                            "stem, and 'pairs' cannot be one") for e in errors)
    assert any(e.startswith("datasets.q.path:") and "'my lfw'" in e for e in errors)
    cfg["datasets"]["p"]["layout"] = "cc11"  # eleven fixed names: any stem will do
    assert not any(e.startswith("datasets.p.") for e in config_errors(cfg))


def test_a_bin_dataset_counts_as_a_protocol_for_the_default_benchmark(tmp_path):
    cfg = _cfg(tmp_path)
    cfg.pop("evaluate")
    assert fill_defaults(cfg, {"benchmarks"}) == [] and "benchmarks" not in cfg
    cfg["datasets"].pop("lfwb")
    assert fill_defaults(cfg, {"benchmarks"}) and "all_pairs" in cfg["benchmarks"]
