"""The README's "Your own photos" config is complete: it passes the schema and every
parse-time check on a folder of photos, also with a fixed pair list and CAST lists."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import REPO

from facecast.config.check import collect
from facecast.config.schema import validate_config as validate
from facecast.evaluate import targets


def _config(tmp_path: Path, imports: bool) -> dict:
    cfg = yaml.safe_load((REPO / "config/own_photos.yaml").read_text())
    root = tmp_path / "photos"
    for person in ("alice", "bob"):
        (root / person).mkdir(parents=True)
    cfg["datasets"]["mine"]["root"] = str(root)
    if imports:
        (root / "pairs.txt").write_text("1 1\nalice 1 2\nalice 1 bob 1\n")
        (tmp_path / "c11").mkdir()
        (tmp_path / "c11" / "0.list").write_text("alice/1.jpg alice/2.jpg 1\n")
        cfg["evaluate"]["imports"] = {
            "fixed": {"format": "lfw_pairs", "path": str(root / "pairs.txt")},
            "c11": {"format": "cast_lists", "path": str(tmp_path / "c11")}}
        cfg["evaluate"]["benchmarks"] += ["fixed", "c11"]
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))
    return cfg


def test_own_photos_config_passes_every_check(tmp_path: Path) -> None:
    cfg = _config(tmp_path, imports=False)
    assert collect(cfg) == ([], [])
    assert targets.eval_benchmarks(cfg, "mine") == ["all_pairs"]


def test_own_photos_config_with_a_pair_list_and_cast_lists(tmp_path: Path) -> None:
    cfg = _config(tmp_path, imports=True)
    assert collect(cfg) == ([], [])
    assert targets.eval_benchmarks(cfg, "mine") == ["all_pairs", "fixed", "c11"]
