"""facecast's cast_arrays benchmarks against CAST's own ``FilterClass`` (issue 30 part 2),
run on arrays built to be hostile: tied runs at every cut, values exactly on the float32
images of decimal bounds, NaN and infinities in filtered and unfiltered columns, NaN
reaching the end of a rank range. Every subset must equal FilterClass's, path for path.
"""
# CAST's lines below are kept as they are written, lint and all:
# ruff: noqa: E711, UP034, UP039, B011

from __future__ import annotations

import csv
import json
import logging
import os

import numpy as np
import pandas as pd
import pytest
import yaml

from facecast.analysis.cast_filters import build_array_subset
from facecast.analysis.cast_tuples import SORT_SIMD, argsort_platform, tie_cuts
from facecast.analysis.filtering import FilterError
from facecast.datasets.cast_manifest import build_cast_manifest
from facecast.io.parquet_io import read_metadata, read_provenance


# --------------------------------------------------------------------------------------
# CAST's reference, its own lines: class FilterClass of StevenZhou90/CAST
# dataset_builder/filter.py, as stored at WesRobbins/CAST (a copy by a CAST author) commit
# 142deb27ded5a64af788f59977dcf0f01c5f2ab0, dataset_builder/filter.py (the code index holds
# no StevenZhou90 copy of that path). Comments and the unused make_rank_old are left out;
# every statement below is the reference's, character for character.
# --------------------------------------------------------------------------------------
class FilterClass():
    def __init__(self, attr_paths, path_paths, columns=None, train_set = None):
        self.attrArr = np.load(attr_paths)
        self.current_mask = np.ones(self.attrArr.shape[0], dtype=bool)
        self.paths = np.load(path_paths)
        self.columns = columns
        self.columns_list = self.make_columns_list()
        self.train_set = train_set

    def make_columns_list(self):
        if self.columns!=None:
            column_list = []
            with open(self.columns) as f:
                array = csv.reader(f)
                for row in array:
                    for i in row:
                        column_list.append(i)
        else:
            column_list = self.attrArr[0].toList()
        return column_list

    def attr_name_to_idx(self, attr_name):
        return self.columns_list.index(attr_name)

    def make_rank(self, arr, idx):
        atr_rank = arr[:,idx]
        ind_list = np.argsort(atr_rank)
        return ind_list

    def make_range_mask(self, attribute_name, style, lower_range, upper_range):
        idx = self.attr_name_to_idx(attribute_name)
        ranked_list = self.make_rank(self.attrArr, idx)

        if(style=='abs'):
            lower_mask = self.attrArr[:,idx] > lower_range
            upper_mask = self.attrArr[:,idx] < upper_range
            mask = lower_mask*upper_mask

        if(style=='rank'):
            upper_bound_rank_idx = round((self.attrArr.shape[0]*upper_range/100))-1
            lower_bound_rank_idx = round((self.attrArr.shape[0]*lower_range/100))
            rank_section = ranked_list[lower_bound_rank_idx:upper_bound_rank_idx]
            mask = np.zeros(self.attrArr.shape[0], dtype=bool)
            mask[rank_section] = True

        return mask

    def make_classification_mask(self, attribute_name, filter_class):
        idx = self.attr_name_to_idx(attribute_name)
        mask = self.attrArr[:, idx]==filter_class
        return mask

    def add_mask(self, tup):
        assert len(tup)==2 or len(tup)==4
        if len(tup)==2:
            mask = self.make_classification_mask(*tup)
        if len(tup)==4:
            mask = self.make_range_mask(*tup)
        self.current_mask = self.current_mask * mask

    def make_new_paths(self):
        return self.paths[self.current_mask]

    def filter_train_set(self, train_set):
        if not train_set:
            return
        if train_set == 'WebFace12M':
            mask = np.load('./data/webface12m_idxs.npy')
        elif os.path.exists(self.train_set):
            ...
        else:
            assert False, f'file does not exist {self.train_set}'

        mask = ~mask
        self.current_mask = self.current_mask * mask

    def run(self, tup_list):
        if self.train_set!=None:
            self.filter_train_set(self.train_set)
        for tup in tup_list:
            self.add_mask(tup)
        paths = self.make_new_paths()
        return paths
# ------------------------------------------------------------------ end of CAST's lines


COLUMNS = ["quality", "yaw", "age", "gender", "other"]


def hostile_arrays(d, n: int, seed: int = 0) -> dict[str, str]:
    """CAST-format arrays of ``n`` rows in ``d``, hostile to every shortcut:

    * ``quality``: a score in 0.1 steps (11 float32 values: tied runs at every cut; the
      float32 images of 0.1 and 0.7 on the abs / class bounds below);
    * ``yaw``: degrees in 0.1 steps, about a quarter NaN (a rank range reaching 100 % ends
      among them), the float32 images of 12.3 (rounded
      up) and 19.9 (rounded down) present;
    * ``age``: whole years with +-inf in a few rows;
    * ``gender``: 0 / 1, a few NaN (unfiltered in most benchmarks);
    * ``other``: never filtered, with NaN;
    unique paths ``id<k>/<j>.jpg`` and an exclusion mask of the first identities (CAST's
    ``train_set``)."""
    rng = np.random.default_rng(seed)
    yaw = np.round(rng.uniform(-20, 20, n), 1)
    yaw[rng.random(n) < 0.25] = np.nan
    yaw[:4] = [12.3, 19.9, 12.3, 19.9]
    age = rng.integers(15, 80, n).astype(np.float64)
    age[rng.choice(n, 6, replace=False)] = [np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf]
    gender = rng.integers(0, 2, n).astype(np.float64)
    gender[rng.random(n) < 0.01] = np.nan
    other = rng.random(n)
    other[rng.random(n) < 0.02] = np.nan
    quality = rng.integers(0, 11, n) / 10
    attrs = np.c_[quality, yaw, age, gender, other].astype(np.float32)
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "attrArr.npy", attrs)
    np.save(d / "paths.npy", np.array([f"id{i // 4:06d}/{i % 4}.jpg" for i in range(n)]))
    exclude = np.arange(n) < n // 10
    np.save(d / "mask.npy", exclude)
    (d / "data").mkdir(exist_ok=True)                 # CAST's train_set file, its own name
    np.save(d / "data" / "webface12m_idxs.npy", exclude)
    (d / "columns.csv").write_text(",".join(COLUMNS) + "\n")
    return {"kind": "cast_arrays", "attributes": str(d / "attrArr.npy"),
            "paths": str(d / "paths.npy"), "columns": str(d / "columns.csv"),
            "exclude_mask": str(d / "mask.npy"), "shard_size": 1 << 16}


def cast_paths(spec: dict[str, str], tuples: list, monkeypatch,
               train_set: str | None = "WebFace12M") -> np.ndarray:
    """FilterClass's paths for ``tuples`` (CAST's ``run.py`` way; the train set excluded
    unless ``train_set`` is None)."""
    monkeypatch.chdir(os.path.dirname(spec["attributes"]))
    tool = FilterClass(spec["attributes"], spec["paths"], columns=spec["columns"],
                       train_set=train_set)
    return tool.run([tuple(t) for t in tuples])


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


HOSTILE = [
    [["quality", "abs", 0.1, 0.7]],                       # values on both float32 bounds
    [["quality", 0.7]],                                   # class = float32(0.7)
    [["yaw", "abs", 12.3, 19.9], ["gender", 1]],          # bounds on values, NaN in both
    [["quality", "rank", 10, 90]],                        # a tie cut at each end
    [["quality", "rank", 33.3, 66.7], ["age", "rank", 5, 95]],
    [["yaw", "rank", 70, 100]],                           # reaches into the NaN rows
    [["yaw", "rank", 90, 100], ["quality", "rank", 0, 100]],  # NaN rows only, then all
    [["age", "abs", 20, 40], ["age", 30]],                # int bounds; +-inf rows
    [["age", "rank", 0, 0], ["other", "rank", 50, 100]],  # hi 0: all but the last row
]


@pytest.mark.parametrize("tuples", HOSTILE, ids=[json.dumps(t) for t in HOSTILE])
def test_subsets_equal_cast_filterclass_path_for_path(tmp_path, monkeypatch, tuples):
    spec = hostile_arrays(tmp_path / "a", 4000, seed=len(json.dumps(tuples)))
    ref = cast_paths(spec, tuples, monkeypatch)
    assert len(ref) > 0
    for workers in (1, 2):
        sub, report = facecast_subset(spec, tmp_path, tuples, workers=workers)
        got = np.load(spec["paths"])[sub["row"].to_numpy()]
        assert got.tolist() == ref.tolist()
        assert report["n_subset"] == len(ref)


def test_the_hostile_arrays_hit_every_difference(tmp_path, monkeypatch):
    """The cases above are not vacuous: a float64 copy of the column, dropping NaN rows and
    a tie-free cut would each select differently from CAST here."""
    spec = hostile_arrays(tmp_path / "a", 4000, seed=1)
    a = np.load(spec["attributes"])
    q = a[:, 0]
    assert ((q > 0.1) != (q.astype(np.float64) > 0.1)).sum() > 300       # float32(0.1)
    assert ((q == 0.7) != (q.astype(np.float64) == 0.7)).sum() > 300      # float32(0.7)
    yaw = a[:, 1]
    assert ((yaw > 12.3) != (yaw.astype(np.float64) > 12.3)).sum() > 2      # rounded up
    assert ((yaw < 19.9) != (yaw.astype(np.float64) < 19.9)).sum() > 2      # rounded down
    nan_any = ~np.isfinite(a).all(axis=1)
    ref = cast_paths(spec, [["quality", "rank", 10, 90]], monkeypatch)
    assert np.isin(np.load(spec["paths"])[nan_any], ref).sum() > 100     # CAST keeps them
    _, report = facecast_subset(spec, tmp_path, [["quality", "rank", 10, 90],
                                                 ["yaw", "rank", 70, 100]])
    tied, nan_range = report["filters"]
    assert len(tied["tie_cuts"]) == 2                         # both ends cut a tie
    assert nan_range["n_nan_selected"] > 0 and nan_range["tie_cuts"][-1]["value"] == "NaN"


def test_large_columns_take_the_bracketed_path_and_still_equal_cast(tmp_path, monkeypatch):
    """Above order_stats' sample threshold the slice ends come from a bracketed sort, not
    np.sort: the selection must still be CAST's, ties and NaN included."""
    spec = hostile_arrays(tmp_path / "a", 300_000, seed=7)
    tuples = [["quality", "rank", 20, 80], ["yaw", "rank", 60, 100], ["age", "abs", 20, 60.5]]
    ref = cast_paths(spec, tuples, monkeypatch)
    sub, _ = facecast_subset(spec, tmp_path, tuples, workers=2)
    assert np.load(spec["paths"])[sub["row"].to_numpy()].tolist() == ref.tolist()


def test_nan_rows_keep_their_manifest_id_and_are_counted(tmp_path, monkeypatch, caplog):
    spec = hostile_arrays(tmp_path / "a", 4000, seed=3)
    tuples = [["yaw", "rank", 70, 100]]
    with caplog.at_level(logging.INFO, logger="facecast.analysis.cast_filters"):
        sub, report = facecast_subset(spec, tmp_path, tuples)
    manifest = pd.read_parquet(tmp_path / "manifest.parquet").set_index("row")
    assert (sub["image_id"].to_numpy() == manifest.loc[sub["row"], "image_id"].to_numpy()).all()
    nan_sub = manifest.loc[sub["row"], "status"].to_numpy() == "nan_attribute"
    assert nan_sub.sum() == report["cast_nan"]["n_subset"] > 0
    assert sub["image_id"][nan_sub].str.contains("//row").all()
    yaw = np.load(spec["attributes"])[:, 1]
    ref = cast_paths(spec, tuples, monkeypatch)
    in_ref = np.isin(np.load(spec["paths"]), ref)
    n_nan_in_range = int((np.isnan(yaw) & in_ref).sum())
    assert report["filters"][0]["n_nan_pass"] == n_nan_in_range > 0
    assert f"{n_nan_in_range} of them in the pool" in caplog.text
    meta = read_metadata(tmp_path / "s1.parquet")
    assert json.loads(meta["facecast.subset_report"])["cast_nan"]["mode"] == "cast"


def test_cast_nan_drop_is_cast_without_the_nan_rows(tmp_path, monkeypatch):
    spec = hostile_arrays(tmp_path / "a", 4000, seed=4)
    tuples = [["quality", "rank", 10, 90], ["age", "abs", 20, 60]]
    ref = cast_paths(spec, tuples, monkeypatch)
    finite = np.isfinite(np.load(spec["attributes"])).all(axis=1)
    ref_finite = set(np.load(spec["paths"])[finite].tolist())
    sub, report = facecast_subset(spec, tmp_path, tuples, cast_nan="drop")
    assert sub["image_id"].tolist() == [p for p in ref.tolist() if p in ref_finite]
    assert report["cast_nan"]["n_pool"] == report["cast_nan"]["n_subset"] == 0
    assert report["cast_nan"]["n_rows"] > 0
    with pytest.raises(FilterError, match="cast_nan"):
        facecast_subset(spec, tmp_path, tuples, cast_nan="keep")


def test_ties_are_logged_and_row_order_is_the_stable_argsort(tmp_path, monkeypatch, caplog):
    spec = hostile_arrays(tmp_path / "a", 4000, seed=5)
    tuples = [["quality", "rank", 10, 90]]
    with caplog.at_level(logging.INFO, logger="facecast.analysis.cast_filters"):
        _, report = facecast_subset(spec, tmp_path, tuples)
    q = np.load(spec["attributes"])[:, 0]            # the cuts are over all rows, as CAST's
    ref_mask = np.isin(np.load(spec["paths"]), cast_paths(spec, tuples, monkeypatch, None))
    expect = [{"value": v.item(), "rows": int((q == v).sum()),
               "inside": int(((q == v) & ref_mask).sum())}
              for v in np.unique(q) if 0 < ((q == v) & ref_mask).sum() < (q == v).sum()]
    assert report["filters"][0]["tie_cuts"] == expect and len(expect) == 2
    assert caplog.text.count("straddle a cut") == 2
    assert "cast_ties: row_order cuts ties in row order" in caplog.text
    # the option: CAST's lines with a stable argsort (tied rows in row order)
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda a, **k: argsort(a, **{"kind": "stable", **k}))
    stable = cast_paths(spec, tuples, monkeypatch)
    monkeypatch.setattr(np, "argsort", argsort)
    sub, stable_report = facecast_subset(spec, tmp_path, tuples, cast_ties="row_order")
    assert np.load(spec["paths"])[sub["row"].to_numpy()].tolist() == stable.tolist()
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
