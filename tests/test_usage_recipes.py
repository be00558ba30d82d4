"""Issue 50, item 5: the two commonest recipes of docs/usage.md - your own model, your own
demographic labels - pass the schema and every check as printed, paths aside."""

import copy
import re

import yaml
from conftest import REPO, TEST_DATA

from facecast.config.check import collect
from facecast.config.prepare import resolve_config

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")
USAGE = (REPO / "docs/usage.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return USAGE.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _block(section: str, lang: str) -> str:
    return re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)


def test_own_model_recipe_passes_the_checks(tmp_path):
    sec = _section("Your own ONNX, TorchScript or arcface model")
    cfg = yaml.safe_load(_block(sec, "yaml"))
    assert cfg["embed"]["models"]["mine"]["backend"] == "onnx"
    assert cfg["fairness"]["leaderboard"] == {"baseline": "lbp"}
    (tmp_path / "mine.onnx").write_bytes(b"onnx")
    cfg["embed"]["models"]["mine"]["weights"] = str(tmp_path / "mine.onnx")
    cfg["datasets"] = {"mine": {"kind": "folder", "root": str(TEST_DATA / "yale")}}
    resolve_config(cfg, SCHEMA)
    assert collect(copy.deepcopy(cfg)) == ([], [])
    # the TorchScript and arcface_torch lines of the same section are valid entries too
    for line, backend in (("mine: {backend: torchscript", "torchscript"),
                          ("mine: {backend: arcface_torch", "arcface_torch")):
        entry = re.search(re.escape(line) + r"[^}]*}", sec.replace("\n  ", " ")).group(0)
        spec = yaml.safe_load(entry)["mine"]
        assert spec["backend"] == backend
        spec["weights"] = str(tmp_path / "mine.onnx")
        other = copy.deepcopy(cfg)
        other["embed"]["models"]["mine"] = spec
        assert collect(other)[0] == [], backend
    # a baseline that is no model is named before any job runs
    bad = copy.deepcopy(cfg)
    bad["fairness"]["leaderboard"]["baseline"] = "lpb"
    assert any(e.startswith("fairness.leaderboard.baseline: 'lpb'") for e in collect(bad)[0])


def test_own_labels_recipe_passes_the_checks(tmp_path):
    sec = _section("Your own demographic labels")
    csv = _block(sec, "text")
    assert csv.splitlines()[0] == "path,identity,sex,skin"
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "labels.csv").write_text(csv)
    text = _block(sec, "yaml").replace("/data/photos", str(tmp_path / "photos"))
    cfg = yaml.safe_load(text)
    resolve_config(cfg, SCHEMA)
    assert collect(copy.deepcopy(cfg))[0] == []
    assert cfg["fairness"]["protected"]["sex"]["column"] == "label_sex"
    # a label the manifest lacks is named with its key
    bad = copy.deepcopy(cfg)
    bad["fairness"]["protected"]["sex"]["column"] = "label_gender"
    assert any(e.startswith("fairness.protected.sex.column") for e in collect(bad)[0])
