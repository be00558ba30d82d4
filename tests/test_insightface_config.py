"""Config checks and targets for pre-aligned / RecordIO / .bin inputs (issue 12)."""

from __future__ import annotations

from facecast.analysis.targets import analysis_targets
from facecast.datasets.checks import config_errors
from facecast.evaluate.targets import eval_benchmarks


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
