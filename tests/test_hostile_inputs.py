"""Issue 16, "done when": a hostile dataset runs through every stage and every row is
accounted for at every stage (rows in = rows out, ids unique), and its exports read back.

The data (``tests/hostile_data.py``) is generated here: real faces under names with
spaces, tabs, newlines and non-ASCII letters, corrupt / truncated / empty / bomb / CMYK /
16-bit / netpbm / hidden files, a FIFO, broken and escaping symlinks, a symlinked
identity folder, a non-UTF-8 name, and a hostile table manifest (BOM, ``/etc/passwd``,
``../``, duplicates, an id-like file name, an empty path, a name over 255 bytes, every
``exclude`` spelling). One Snakemake run processes it as two datasets: ``hostile`` (the
folder walk) and ``hostile_table`` (the manifest, which also carries the labels the
fairness stage needs). Bad ``exclude`` values are an error case of their own
(tests/test_datasets.py::test_bad_exclude_value_is_an_error_naming_the_line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_snakemake, tiny_demo_config
from hostile_data import (
    MAX_PIXELS,
    TABLE_EXTRA_STATUSES,
    folder_expectations,
    make_hostile_tree,
    write_hostile_table,
)

from facecast.evaluate.protocols import read_cast_lists
from facecast.io.shard_index import shard_files

DATASETS = ("hostile", "hostile_table")
BENCHES = ("everyone",)


def hostile_config(root: Path, table: Path) -> dict:
    """Every stage on the two hostile datasets, as small as it goes."""
    cfg = tiny_demo_config()
    cfg["datasets"] = {
        "hostile": {"kind": "folder", "root": str(root), "shard_size": 64},
        "hostile_table": {"kind": "table", "root": str(root), "manifest": str(table),
                          "shard_size": 64},
    }
    cfg["faces"]["max_pixels"] = MAX_PIXELS
    cfg["embed"]["models"] = {"dlib": {"backend": "dlib_resnet"}}
    cfg["fairness"].pop("leaderboard", None)  # its baseline (lbp) is not a model here
    cfg["attributes"]["scorers"] = ["native"]
    cfg["attributes"]["trainer"] = {"enabled": False}
    cfg["correlations"]["methods"] = ["pearson"]
    cfg["benchmarks"] = {"everyone": {"filters": []}}
    cfg["mining"].update({"reference_model": "dlib", "band_mode": "absolute",
                          "band": [-1.0, 1.0], "n_folds": 2, "n_genuine": 3,
                          "n_impostor": 3, "val_fold": False, "max_image_uses": 0,
                          "on_shortfall": "write"})
    cfg["evaluate"].update({"models": ["dlib"], "benchmarks": list(BENCHES),
                            "fars": [0.1]})
    cfg["fairness"].update({
        "datasets": ["hostile_table"], "models": ["dlib"], "protocols": ["everyone"],
        "protected": {"gender": {"column": "label_male", "bins": [0.5],
                                 "labels": ["female", "male"]}},
        "legitimate": {}, "min_pairs": 1, "n_boot": 0, "hard_pairs": 2,
        "thresholds": {"fmr_targets": [0.2]},
    })
    cfg.setdefault("features", {})["enabled"] = True  # per-shard dlib landmarks: rows kept
    # stages built on the demo's planted labels have nothing to work on here
    for section in ("audit", "describe", "covariates", "quality", "demographics",
                    "identification"):
        if section in cfg:
            cfg[section]["enabled"] = False
    return cfg


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("hostile")
    root = make_hostile_tree(base / "data")
    table = write_hostile_table(base / "data", root)
    work = base / "work"
    run_snakemake(work, hostile_config(root, table))
    return work, root, table


def _stage_rows(paths: list[Path]) -> pd.DataFrame:
    return pd.concat([pq.read_table(p).to_pandas() for p in paths], ignore_index=True)


def _same_rows(stage: pd.DataFrame, manifest: pd.DataFrame, what: str) -> None:
    assert len(stage) == len(manifest), f"{what}: {len(stage)} rows for {len(manifest)} in"
    assert stage["image_id"].is_unique, f"{what}: duplicate image_id"
    assert set(stage["image_id"]) == set(manifest["image_id"]), f"{what}: other ids"


def test_manifests_give_every_entry_its_true_status(hostile_run) -> None:
    work, root, table = hostile_run
    folder = pd.read_parquet(work / "results/hostile/manifest.parquet")
    expected = folder_expectations()
    got = dict(zip(folder["path"], folder["status"], strict=True))
    utf8 = [p for p in got if "not-utf8" in p]
    assert utf8 == ["bad/not-utf8-\\xff.jpg"] and got.pop(utf8[0]) == "unreadable"
    assert got == expected
    assert folder["image_id"].is_unique

    tab = pd.read_parquet(work / "results/hostile_table/manifest.parquet")
    n_people = 18
    assert len(tab) == n_people + len(TABLE_EXTRA_STATUSES)
    assert (tab["status"][:n_people] == "ok").all()
    assert list(tab["status"][n_people:]) == TABLE_EXTRA_STATUSES
    assert tab["image_id"].is_unique
    by_id = tab.set_index("image_id")
    assert by_id.loc["paul_rudd/x.jpg#dup1", "status"] == "ok"  # the real file, not a dup
    assert not tab["exclude"][:n_people].any()                  # no/False/0 are false
    assert tab["exclude"].iloc[-1] and tab["exclude"].iloc[-2]  # yes/YES are true
    assert tab["message"][n_people + 6] == f"{table}:27: empty path"
    assert "File name too long" in tab["message"][n_people + 7]


@pytest.mark.parametrize("ds", DATASETS)
def test_every_row_reaches_every_stage(hostile_run, ds: str) -> None:
    work, _, _ = hostile_run
    res = work / "results" / ds
    manifest = pd.read_parquet(res / "manifest.parquet")
    faces = _stage_rows(shard_files(res / "index/faces.parquet"))
    _same_rows(faces, manifest, f"{ds} faces")
    st = faces.set_index("image_id")["status"]
    non_ok = manifest[manifest["status"] != "ok"].set_index("image_id")["status"]
    assert (st[non_ok.index] == non_ok).all(), "manifest statuses must pass through faces"
    if ds == "hostile":
        for bad in ("bad/corrupt.jpg", "bad/empty.jpg", "bad/bomb.png"):
            assert st[bad] == "decode_error", bad
        for fine in ("bad/cmyk.jpg", "bad/netpbm.ppm", "bad/grey.pgm", "kate\tsiegel/k\n2.jpg",
                     "グレース/g1.jpg"):
            assert st[fine] in ("ok", "no_face"), (fine, st[fine])
    assert (st == "ok").sum() >= 15, st.value_counts()

    embed = _stage_rows(shard_files(res / "index/embed_dlib.parquet"))
    _same_rows(embed, manifest, f"{ds} embed")
    emb_ok = set(embed.loc[embed["status"] == "ok", "image_id"])
    assert emb_ok == set(st[st == "ok"].index)

    native = _stage_rows(sorted((res / "attributes/native").glob("*.parquet")))
    _same_rows(native, manifest, f"{ds} native attributes")
    attrs = pd.read_parquet(res / "attributes.parquet")
    _same_rows(attrs, manifest, f"{ds} attributes.parquet")

    features = _stage_rows(sorted((res / "features/shards").glob("*.parquet")))
    _same_rows(features, manifest, f"{ds} feature shards")
    _same_rows(pd.read_parquet(res / "features/images.parquet"), manifest,
               f"{ds} features/images.parquet")


@pytest.mark.parametrize("ds", DATASETS)
@pytest.mark.parametrize("bench", BENCHES)
def test_benchmarks_evaluation_and_exports_read_back(hostile_run, ds: str, bench: str) -> None:
    work, _, _ = hostile_run
    res = work / "results" / ds
    attrs = pd.read_parquet(res / "attributes.parquet").set_index("image_id")
    subset = pd.read_parquet(res / "benchmarks" / bench / "subset.parquet")
    assert subset["image_id"].is_unique and len(subset) > 0
    assert (attrs.loc[subset["image_id"], "status"] == "ok").all()
    assert not attrs.loc[subset["image_id"], "exclude"].any()
    pairs = pd.read_parquet(res / "benchmarks" / bench / "pairs.parquet")
    assert len(pairs) > 0 and set(pairs["label"]) == {0, 1}
    used = set(pairs["image_a"]) | set(pairs["image_b"])
    assert used <= set(subset["image_id"])
    assert not pairs.duplicated(["image_a", "image_b"]).any()
    # the CAST lists read back to the same pairs (issue 16.4: names with tabs/newlines)
    back = read_cast_lists(res / "benchmarks" / bench).rename(
        columns={"path_a": "image_a", "path_b": "image_b"})  # ok rows: image_id == path
    key = ["image_a", "image_b", "label"]
    got = back[key].sort_values(key).reset_index(drop=True)
    want = pairs[key].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    scores = pd.read_parquet(res / "eval" / "dlib" / f"{bench}.parquet")
    assert len(scores) == len(pairs)


def test_fairness_keeps_every_pair(hostile_run) -> None:
    work, _, _ = hostile_run
    res = work / "results/hostile_table"
    pairs = pd.read_parquet(res / "benchmarks/everyone/pairs.parquet")
    fair = pd.read_parquet(res / "fairness/dlib/everyone/pairs.parquet")
    assert len(fair) == len(pairs)
    assert set(zip(fair["image_a"], fair["image_b"], strict=True)) == set(
        zip(pairs["image_a"], pairs["image_b"], strict=True))
    summary = json.loads((res / "benchmarks/everyone/mining_report.json").read_text())
    assert summary  # the mining report is written (with its shortfall) for tiny pools


def test_an_empty_benchmark_pool_warns_loudly(tmp_path: Path, caplog) -> None:
    """Every row excluded (e.g. 'no' read as True before issue 16.3): a loud warning."""
    import logging

    from facecast.analysis.filtering import build_subset
    from facecast.io.parquet_io import write_parquet

    attrs = tmp_path / "attributes.parquet"
    write_parquet(pd.DataFrame({"image_id": ["a", "b"], "identity": ["p", "q"],
                                "split": ["all", "all"], "exclude": [True, True],
                                "status": ["ok", "ok"]}), attrs)
    with caplog.at_level(logging.WARNING):
        report = build_subset(attrs, [], tmp_path / "subset.parquet", tmp_path / "d.txt")
    assert report["n_pool"] == 0
    assert any("EMPTY BENCHMARK POOL" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
