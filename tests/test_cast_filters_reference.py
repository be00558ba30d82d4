"""facecast's cast_arrays benchmarks against what CAST's own ``FilterClass`` selected
(issue 30 part 2, issue 39), on arrays built to be hostile: tied runs at every cut, values
exactly on the float32 images of decimal bounds, NaN and infinities in filtered and
unfiltered columns, NaN reaching the end of a rank range. Every subset must equal
FilterClass's, path for path.

CAST's code is not in this repository: ``tests/reference/cast_recorder.py`` ran
``dataset_builder/filter.py`` from a CAST checkout on the arrays
``tests/reference/cast_inputs.py`` builds and kept its selections in
``tests/data/reference/cast/`` (docs/CONTRIBUTING.md, "Reference records"). These tests
rebuild the same arrays from each record's seed and row count and compare.

Which of the rows tied across a rank cut a slice keeps is numpy's default argsort's
choice, which depends on the NumPy version and the CPU's sort kernel. Where this machine
sorts as the recording machine did (the record's ``argsort_platform``), and for the
stable-argsort record, the comparison is exact, row for row; elsewhere it is exact on
every row not tied across a cut (:func:`cast_inputs.cut_tie_rows`).
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from reference.cast_inputs import (
    CASES,
    DIGEST_CASES,
    HOSTILE,
    cut_tie_rows,
    hostile_arrays,
    hostile_columns,
    inputs_digest,
    mask_from_hex,
    rows_digest,
)
from reference.common import RECORDS, read_record

from facecast.analysis.cast_filters import build_array_subset
from facecast.analysis.cast_tuples import SORT_SIMD, argsort_platform, tie_cuts
from facecast.analysis.filtering import FilterError
from facecast.datasets.cast_manifest import build_cast_manifest
from facecast.io.parquet_io import read_metadata, read_provenance


def record(name: str) -> dict:
    """The record of case ``name`` (:data:`CASES`)."""
    return read_record("cast", f"filterclass_{name}")


def sorts_ties_as_recorded(rec: dict) -> bool:
    """Whether numpy here orders tied values as it did where ``rec`` was recorded (or the
    record used the stable argsort, the same everywhere)."""
    if rec["inputs"]["argsort"] == "stable":
        return True
    keys = ("numpy", "machine", "sort_simd")
    here, there = argsort_platform(), rec["inputs"]["argsort_platform"]
    return all(here[k] == there[k] for k in keys)


def assert_is_cast(got: np.ndarray, name: str, keep: np.ndarray | None = None) -> np.ndarray:
    """Assert facecast's row mask ``got`` is CAST's recorded selection of case ``name``
    (ANDed with ``keep`` when given); return CAST's mask (None for a digest record)."""
    rec, case = record(name), CASES[name]
    attrs = hostile_columns(case["n"], case["seed"])[0]
    keep = np.ones(case["n"], bool) if keep is None else keep
    tied = cut_tie_rows(attrs, case["tuples"])
    out = rec["outputs"]
    if name in DIGEST_CASES:
        assert rows_digest(got & ~tied) == out["outside_ties"]
        if sorts_ties_as_recorded(rec):
            assert rows_digest(got) == out["rows"]
        return None
    ref = mask_from_hex(out["mask_hex"], case["n"])
    assert int(ref.sum()) == out["n_selected"]
    assert rows_digest(ref & ~tied) == out["outside_ties"]      # the record is consistent
    want = ref & keep
    np.testing.assert_array_equal(got & ~tied, want & ~tied)    # every untied row
    if sorts_ties_as_recorded(rec):
        np.testing.assert_array_equal(got, want)                # row for row
    return ref


def facecast_subset(spec, tmp_path, tuples, *, workers=1, **bench) -> tuple[pd.DataFrame, dict]:
    """``build_array_subset`` of the tuples, as a YAML config writes them."""
    manifest = tmp_path / "manifest.parquet"
    if not manifest.exists():
        build_cast_manifest(spec, manifest)
    cfg = yaml.safe_load(f"cast_filters: {json.dumps(tuples)}")
    cfg.update(bench)
    out = tmp_path / f"s{workers}.parquet"
    report = build_array_subset(spec, manifest, cfg, out, tmp_path / "d.txt", bench="b",
                                statuses=["ok"], workers=workers)
    return pd.read_parquet(out), report


def subset_mask(sub: pd.DataFrame, spec: dict) -> np.ndarray:
    """The subset's rows as a mask, after checking its rows and paths are CAST's output
    order and strings (``FilterClass.run`` returns ``paths[mask]``: row order)."""
    paths = np.load(spec["paths"])
    rows = sub["row"].to_numpy()
    assert np.all(np.diff(rows) > 0)
    assert sub["path"].tolist() == paths[rows].tolist()
    mask = np.zeros(len(paths), bool)
    mask[rows] = True
    return mask


def case_arrays(tmp_path, name: str) -> dict:
    case = CASES[name]
    return hostile_arrays(tmp_path / "a", case["n"], case["seed"])


def test_every_record_names_cast_at_a_commit_and_rebuilds_its_inputs():
    """One record per case, each from StevenZhou90/CAST at a 40-hex commit, its inputs the
    ones cast_inputs builds today (same case, same array bytes)."""
    names = {p.stem for p in (RECORDS / "cast").glob("filterclass_*.json")}
    assert names == {f"filterclass_{n}" for n in CASES}
    for name, case in CASES.items():
        rec = record(name)
        assert rec["reference"] == "StevenZhou90/CAST"
        assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"])
        assert (rec["path"], rec["function"]) == ("dataset_builder/filter.py",
                                                  "FilterClass.run")
        assert rec["command"].startswith("python tests/reference/record.py") and \
            "--cast" in rec["command"]
        assert {k: rec["inputs"][k] for k in case} == json.loads(json.dumps(case))
        assert rec["inputs"]["arrays_sha256"] == inputs_digest(case["n"], case["seed"])


@pytest.mark.parametrize("i", range(len(HOSTILE)), ids=[json.dumps(t) for t in HOSTILE])
def test_subsets_equal_cast_filterclass_path_for_path(tmp_path, i):
    name = f"hostile_{i}"
    assert CASES[name]["tuples"] == HOSTILE[i]
    spec = case_arrays(tmp_path, name)
    assert record(name)["outputs"]["n_selected"] > 0
    for workers in (1, 2):
        sub, report = facecast_subset(spec, tmp_path, HOSTILE[i], workers=workers)
        got = subset_mask(sub, spec)
        assert_is_cast(got, name)
        assert report["n_subset"] == got.sum()


def test_the_hostile_arrays_hit_every_difference(tmp_path):
    """The cases above are not vacuous: a float64 copy of the column, dropping NaN rows and
    a tie-free cut would each select differently from CAST here, and the rows tied across
    a cut (compared exactly only on the recording platform) are few."""
    attrs, _, exclude = hostile_columns(CASES["hostile_0"]["n"], CASES["hostile_0"]["seed"])
    q = attrs[:, 0].astype(np.float64)
    ref = mask_from_hex(record("hostile_0")["outputs"]["mask_hex"], len(q))
    assert (ref != ((q > 0.1) & (q < 0.7) & ~exclude)).sum() > 300       # float32(0.1)
    ref = mask_from_hex(record("hostile_1")["outputs"]["mask_hex"], len(q))
    assert ref.sum() > 300 and not (q[ref] == 0.7).any()                  # float32(0.7)
    spec = case_arrays(tmp_path, "nan_kept")
    a = np.load(spec["attributes"])
    yaw = a[:, 1]
    assert ((yaw > 12.3) != (yaw.astype(np.float64) > 12.3)).sum() > 2      # rounded up
    assert ((yaw < 19.9) != (yaw.astype(np.float64) < 19.9)).sum() > 2      # rounded down
    nan_any = ~np.isfinite(a).all(axis=1)
    ref = mask_from_hex(record("nan_kept")["outputs"]["mask_hex"], len(a))
    assert (nan_any & ref).sum() > 100                                    # CAST keeps them
    _, report = facecast_subset(spec, tmp_path, [["quality", "rank", 10, 90],
                                                 ["yaw", "rank", 70, 100]])
    tied, nan_range = report["filters"]
    assert len(tied["tie_cuts"]) == 2                         # both ends cut a tie
    assert nan_range["n_nan_selected"] > 0 and nan_range["tie_cuts"][-1]["value"] == "NaN"
    for name in ("hostile_3", "hostile_4"):
        case = CASES[name]
        tied_rows = cut_tie_rows(hostile_columns(case["n"], case["seed"])[0], case["tuples"])
        assert 0 < tied_rows.sum() < 0.5 * case["n"]


def test_large_columns_take_the_bracketed_path_and_still_equal_cast(tmp_path):
    """Above order_stats' sample threshold the slice ends come from a bracketed sort, not
    np.sort: the selection must still be CAST's, ties and NaN included."""
    spec = case_arrays(tmp_path, "large")
    sub, _ = facecast_subset(spec, tmp_path, CASES["large"]["tuples"], workers=2)
    rows = sub["row"].to_numpy()
    got = np.zeros(CASES["large"]["n"], bool)
    got[rows] = True
    rec = record("large")
    assert np.all(np.diff(rows) > 0)
    ref = assert_is_cast(got, "large")
    # ANDed rank filters: which tied rows each keeps depends on the argsort platform, so
    # the count equals CAST's exactly only where ties sort as recorded; elsewhere it
    # differs by at most the rows tied across a cut
    tied = cut_tie_rows(hostile_columns(CASES["large"]["n"], CASES["large"]["seed"])[0],
                        CASES["large"]["tuples"])
    if sorts_ties_as_recorded(rec):
        assert len(sub) == rec["outputs"]["n_selected"]
    assert abs(len(sub) - rec["outputs"]["n_selected"]) <= int(tied.sum())
    assert ref is None or (got & ~tied).sum() == (ref & ~tied).sum()


def test_nan_rows_keep_their_manifest_id_and_are_counted(tmp_path, caplog):
    spec = case_arrays(tmp_path, "nan_rows")
    tuples = CASES["nan_rows"]["tuples"]
    with caplog.at_level(logging.INFO, logger="facecast.analysis.cast_filters"):
        sub, report = facecast_subset(spec, tmp_path, tuples)
    ref = assert_is_cast(subset_mask(sub, spec), "nan_rows")
    manifest = pd.read_parquet(tmp_path / "manifest.parquet").set_index("row")
    assert (sub["image_id"].to_numpy() == manifest.loc[sub["row"], "image_id"].to_numpy()).all()
    nan_sub = manifest.loc[sub["row"], "status"].to_numpy() == "nan_attribute"
    assert nan_sub.sum() == report["cast_nan"]["n_subset"] > 0
    assert (sub["image_id"][nan_sub] == sub["path"][nan_sub] + "//row"
            + (sub["row"][nan_sub] + 1).astype(str)).all()
    assert (sub["image_id"][~nan_sub] == sub["path"][~nan_sub]).all()
    yaw = np.load(spec["attributes"])[:, 1]
    n_nan_in_range = int((np.isnan(yaw) & ref).sum())
    assert n_nan_in_range > 0
    if sorts_ties_as_recorded(record("nan_rows")):    # which NaN row the slice drops
        assert report["filters"][0]["n_nan_pass"] == n_nan_in_range
    assert f"{report['filters'][0]['n_nan_pass']} of them in the pool" in caplog.text
    meta = read_metadata(tmp_path / "s1.parquet")
    assert json.loads(meta["facecast.subset_report"])["cast_nan"]["mode"] == "cast"


def test_cast_nan_drop_is_cast_without_the_nan_rows(tmp_path):
    spec = case_arrays(tmp_path, "nan_drop")
    tuples = CASES["nan_drop"]["tuples"]
    finite = np.isfinite(np.load(spec["attributes"])).all(axis=1)
    sub, report = facecast_subset(spec, tmp_path, tuples, cast_nan="drop")
    ref = assert_is_cast(subset_mask(sub, spec), "nan_drop", keep=finite)
    assert (ref & ~finite).sum() > 0                      # CAST kept NaN rows; drop did not
    assert sub["image_id"].tolist() == sub["path"].tolist()
    assert report["cast_nan"]["n_pool"] == report["cast_nan"]["n_subset"] == 0
    assert report["cast_nan"]["n_rows"] > 0
    with pytest.raises(FilterError, match="cast_nan"):
        facecast_subset(spec, tmp_path, tuples, cast_nan="keep")


def test_ties_are_logged_and_row_order_is_the_stable_argsort(tmp_path, caplog):
    spec = case_arrays(tmp_path, "ties_all_rows")
    tuples = CASES["ties_all_rows"]["tuples"]
    assert CASES["ties_stable"]["tuples"] == tuples
    assert CASES["ties_stable"]["seed"] == CASES["ties_all_rows"]["seed"]
    with caplog.at_level(logging.INFO, logger="facecast.analysis.cast_filters"):
        _, report = facecast_subset(spec, tmp_path, tuples)
    q = np.load(spec["attributes"])[:, 0]            # the cuts are over all rows, as CAST's
    # CAST without its train set: how many tied rows its slice keeps (the same everywhere)
    ref_mask = mask_from_hex(record("ties_all_rows")["outputs"]["mask_hex"], len(q))
    expect = [{"value": v.item(), "rows": int((q == v).sum()),
               "inside": int(((q == v) & ref_mask).sum())}
              for v in np.unique(q) if 0 < ((q == v) & ref_mask).sum() < (q == v).sum()]
    assert report["filters"][0]["tie_cuts"] == expect and len(expect) == 2
    assert caplog.text.count("straddle a cut") == 2
    assert "cast_ties: row_order cuts ties in row order" in caplog.text
    # the option: CAST's code with a stable argsort (tied rows in row order)
    sub, stable_report = facecast_subset(spec, tmp_path, tuples, cast_ties="row_order")
    assert_is_cast(subset_mask(sub, spec), "ties_stable")
    assert stable_report["filters"][0]["tie_cuts"] == expect     # same ties, other rows


def test_tie_cuts_are_the_values_with_rows_on_both_sides():
    """tie_cuts, from the argsort order or from sorted_at, against brute force over every
    value (NaN rows one tied group): ties, NaN, +-inf, empty and whole slices."""
    rng = np.random.default_rng(8)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        v = rng.integers(0, 6, n).astype(np.float32)
        v[rng.random(n) < (0.3 if trial % 2 else 0)] = np.nan
        v[rng.random(n) < 0.02] = np.inf
        lo = float(rng.choice([0, 10, 33.3, 50, 90]))
        hi = float(rng.choice([lo, 0, 50, 66.7, 100]))
        order = np.argsort(v)
        m = np.zeros(n, bool)
        m[order[round(n * lo / 100):round(n * hi / 100) - 1]] = True
        groups = [np.isnan(v)] + [v == x for x in np.unique(v[~np.isnan(v)])]
        brute = sorted((int(g.sum()), int((g & m).sum())) for g in groups
                       if 0 < (g & m).sum() < g.sum())
        for given in (order, None):
            cuts = tie_cuts(v, m, lo, hi, given)
            assert sorted((c["rows"], c["inside"]) for c in cuts) == brute


def test_every_subset_records_the_argsort_platform(tmp_path):
    spec = hostile_arrays(tmp_path / "a", 500)
    facecast_subset(spec, tmp_path, [["quality", "rank", 0, 50]])
    prov = read_provenance(tmp_path / "s1.parquet")
    platform = prov["argsort_platform"]
    assert platform == json.loads(json.dumps(argsort_platform()))
    assert platform["numpy"] == np.__version__ and set(platform["sort_simd"]) <= set(SORT_SIMD)
    assert prov["cast_nan"] == "cast"


def test_a_string_class_is_refused_not_an_empty_benchmark(tmp_path):
    spec = hostile_arrays(tmp_path / "a", 500)
    with pytest.raises(FilterError, match="class is a string"):
        facecast_subset(spec, tmp_path, [["gender", "1"]])


def test_a_training_subset_of_nan_rows_lists_their_paths(tmp_path):
    from facecast.analysis.stage import build_train_subset

    spec = hostile_arrays(tmp_path / "a", 2000, seed=6)
    sub, _ = facecast_subset(spec, tmp_path, [["yaw", "rank", 60, 100]])
    report = build_train_subset(tmp_path / "s1.parquet", tmp_path / "manifest.parquet", None,
                                spec, {"benchmark": "b", "format": "list",
                                       "min_images_per_identity": 1}, tmp_path / "t",
                                name="t", dataset_dir=tmp_path, seed=1)
    lines = (tmp_path / "t" / "train.lst").read_text().splitlines()
    listed = {ln.split("\t")[2] for ln in lines}
    assert len(lines) == report["n_images"] == len(sub)
    assert listed == set(np.load(spec["paths"])[sub["row"].to_numpy()].tolist())
    assert sub["image_id"].str.contains("//row").any()


def test_cast_nan_drop_without_a_cast_arrays_dataset_is_a_config_error():
    from facecast.analysis.checks import cast_nan_errors

    cfg = {"datasets": {"lfw": {"kind": "folder", "root": "x"}},
           "benchmarks": {"b": {"cast_nan": "drop"}, "c": {"cast_nan": "cast"}}}
    assert cast_nan_errors(cfg) == [
        "benchmarks.b.cast_nan: drop applies to cast_arrays datasets only (rows with a NaN "
        "attribute cell, status nan_attribute); no dataset here is one, so it would change "
        "nothing - remove it"]
    cfg["datasets"]["web"] = {"kind": "cast_arrays"}
    assert cast_nan_errors(cfg) == []
