"""Mitigation runs by default where the calibration split leaves enough identities on each
side (issue 41.4): the rule, its counts per dataset kind, and the plan lines that say which
rule decided. Parse time only: no job runs."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import REPO, TEST_DATA

from facecast.config.prepare import resolve_config
from facecast.mitigation import auto
from facecast.mitigation import targets as mitigation_targets
from facecast.mitigation.auto import (
    MIN_SIDE_IDENTITIES,
    identity_count,
    needed_identities,
    side_counts,
)

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def _resolved(cfg: dict) -> tuple[dict, list[str]]:
    cfg = copy.deepcopy(cfg)
    plan = resolve_config(cfg, SCHEMA)
    return cfg, [line for line in plan if line.startswith("mitigation:")]


def _demo(n_identities: int | None = None, **mitigation) -> dict:
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    cfg["mitigation"] = {k: v for k, v in cfg["mitigation"].items() if k != "enabled"}
    cfg["mitigation"].update(mitigation)
    if n_identities is not None:
        cfg["datasets"]["demo"]["synthetic"]["n_identities"] = n_identities
    return cfg


def test_the_split_rule_and_its_threshold():
    assert MIN_SIDE_IDENTITIES == 50
    assert side_counts(100, 0.5) == (50, 50) and side_counts(99, 0.5) == (50, 49)
    assert needed_identities(0.5) == 100
    assert needed_identities(0.2) == 248           # round(0.2 x 248) = 50 calibrate
    assert min(side_counts(needed_identities(0.3), 0.3)) >= 50
    assert min(side_counts(needed_identities(0.3) - 1, 0.3)) < 50


def test_left_out_the_counts_decide_and_the_plan_says_so():
    cfg, lines = _resolved(_demo())                 # the demo's 240 identities
    assert cfg["mitigation"]["enabled"] is True
    assert lines[0] == ("mitigation: on for demo (mitigation.enabled left out; 240 "
                        "identities (synthetic.n_identities) -> 120 calibration / 120 "
                        "evaluated at calibration.fraction 0.5: at least 50 on each side; "
                        "mitigation.enabled: false turns it off)")
    assert mitigation_targets.targets(cfg, "demo")
    cfg, lines = _resolved(_demo(99))
    assert cfg["mitigation"]["enabled"] is False and not mitigation_targets.targets(cfg, "demo")
    assert "99 identities" in lines[0] and "50 calibration / 49 evaluated" in lines[0]
    assert "fewer than 50 on a side; mitigation.enabled: true runs it anyway" in lines[0]
    # the fraction moves the sides
    cfg, lines = _resolved(_demo(240, calibration={"fraction": 0.1}))
    assert cfg["mitigation"]["enabled"] is False and "24 calibration / 216" in lines[0]
    # written by the user: the user decides, whatever the counts
    cfg, lines = _resolved({**_demo(99), "mitigation": {"enabled": True}})
    assert cfg["mitigation"]["enabled"] is True
    assert lines[0] == "mitigation: on (mitigation.enabled: true)"
    cfg, lines = _resolved({**_demo(), "mitigation": "off"})
    assert cfg["mitigation"]["enabled"] is False and lines[0].startswith("mitigation: off (")


def test_the_newcomers_two_line_config_keeps_it_off_with_the_count():
    cfg = {"datasets": {"mine": {"kind": "folder", "root": str(TEST_DATA / "yale")}},
           "embed": {"models": {"dlib": {"backend": "dlib_resnet"}}}}
    cfg, lines = _resolved(cfg)
    assert cfg["mitigation"]["enabled"] is False
    assert lines == [f"mitigation: off for mine (mitigation.enabled left out; 5 identities "
                     f"(identity folders of {TEST_DATA / 'yale'}) -> 2 calibration / 3 "
                     "evaluated at calibration.fraction 0.5: fewer than 50 on a side; "
                     "mitigation.enabled: true runs it anyway)"]


def test_only_the_datasets_that_pass_get_it(tmp_path):
    root = tmp_path / "photos"
    for i in range(1200):                         # more than one batch of 1,000 folders
        (root / f"p{i:04d}").mkdir(parents=True)
    cfg = _demo()
    cfg["datasets"]["mine"] = {"kind": "folder", "root": str(root)}
    cfg["datasets"]["demo"]["synthetic"]["n_identities"] = 60
    cfg, lines = _resolved(cfg)
    assert cfg["mitigation"]["enabled"] is True and cfg["mitigation"]["datasets"] == ["mine"]
    assert any(s.startswith("mitigation: on for mine") and "at least 1000 identities" in s
               for s in lines), lines              # counting stopped once enough were seen
    assert any(s.startswith("mitigation: off for demo") for s in lines)


@pytest.mark.parametrize("kind", ["table_csv", "table_parquet", "bfw", "rfw", "celeba"])
def test_counts_of_each_kind_stop_once_enough(tmp_path, kind, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(auto, "_ROWS", 50)           # read 50 values at a time
    ids = [f"id{i % 70}" for i in range(400)]     # 70 identities
    if kind.startswith("table"):
        frame = pd.DataFrame({"path": [f"{i}.jpg" for i in range(400)], "identity": ids})
        path = tmp_path / ("m.csv" if kind == "table_csv" else "m.parquet")
        frame.to_csv(path, index=False) if kind == "table_csv" else frame.to_parquet(path)
        spec = {"kind": "table", "manifest": str(path)}
    elif kind == "bfw":
        pd.DataFrame({"fold": 1, "p1": "a", "p2": "b", "label": 0, "id1": ids,
                      "id2": ids[::-1]}).to_csv(tmp_path / "t.csv")
        spec = {"kind": "bfw", "table": str(tmp_path / "t.csv")}
    elif kind == "rfw":
        for s in ("African", "Asian"):
            (tmp_path / "txts" / s).mkdir(parents=True)
            (tmp_path / "txts" / s / f"{s}_people.txt").write_text(
                "".join(f"{s[:2]}{i}\t3\n" for i in range(35)))
        spec = {"kind": "rfw", "root": str(tmp_path), "sets": ["African", "Asian"]}
    else:
        (tmp_path / "identity_CelebA.txt").write_text(
            "".join(f"{i:06d}.jpg {v[2:]}\n" for i, v in enumerate(ids)))
        spec = {"kind": "celeba", "root": str(tmp_path)}
    n, how = identity_count(spec, need=1000)
    assert n == 70 and not how.startswith("at least"), how
    n, how = identity_count(spec, need=20)
    assert 20 <= n < 70 and how.startswith("at least")


def test_kinds_without_identities_before_a_job_keep_it_off(tmp_path):
    assert identity_count({"kind": "rfw", "bins": {"African": "x.bin"}}, 100) == (
        None, "the .bin form names no identities")
    assert identity_count({"kind": "recordio", "rec": "x.rec"}, 100)[0] is None
    assert identity_count({"kind": "folder", "root": str(tmp_path / "nowhere")}, 100)[0] \
        is None
