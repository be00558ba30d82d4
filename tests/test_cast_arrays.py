"""CAST's precomputed attribute arrays (kind cast_arrays), CAST's filter tuples and CAST's
random verification lists (issue 23). Arrays are built in each test (tests/data holds none).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO, run_snakemake

from facecast.analysis.cast_filters import build_array_subset, read_columns, select_from_arrays
from facecast.analysis.cast_random import cast_random_pairs, identity_runs
from facecast.analysis.cast_tuples import parse_cast_filters
from facecast.analysis.filtering import FilterError, cast_rank_select, describe_filters
from facecast.analysis.mining_config import MiningConfig
from facecast.attributes.cast_arrays import write_cast_attributes
from facecast.config.check import ConfigError, check_config
from facecast.config.prepare import resolve_config
from facecast.datasets.cast_arrays import (
    array_errors,
    open_cast_arrays,
    read_spans,
)
from facecast.datasets.cast_manifest import build_cast_manifest
from facecast.datasets.cast_paths import path_arrays, read_path_blocks
from facecast.datasets.manifest import DatasetError, read_shard_ids
from facecast.io.parquet_io import read_metadata

SCHEMA = str(REPO / "workflow" / "schemas" / "config.schema.yaml")
COLUMNS = ["Heavy_Makeup", "vitor_gender", "age"]


def make_arrays(d: Path, n_ids: int = 40, per: int = 5, seed: int = 0,
                paths: list[str] | None = None) -> dict[str, str]:
    """CAST-format arrays in ``d``: attributes, paths, columns.csv and an exclusion mask."""
    rng = np.random.default_rng(seed)
    if paths is None:
        paths = [f"0_0_{i:07d}/{k}.jpg" for i in range(n_ids) for k in range(per)]
    n = len(paths)
    attrs = np.c_[rng.integers(0, 5, n) / 4, rng.integers(0, 2, n),
                  rng.normal(40, 10, n)].astype(np.float32)
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "attrArr.npy", attrs)
    np.save(d / "paths.npy", np.array(paths))
    mask = np.zeros(n, bool)
    mask[: n // 5] = True
    np.save(d / "mask.npy", mask)
    (d / "columns.csv").write_text(",".join(COLUMNS) + "\n")
    return {"kind": "cast_arrays", "attributes": str(d / "attrArr.npy"),
            "paths": str(d / "paths.npy"), "columns": str(d / "columns.csv"),
            "exclude_mask": str(d / "mask.npy"), "shard_size": 64}


# --------------------------------------------------------------------------- ingest


def test_manifest_and_attributes_come_straight_from_the_arrays(tmp_path):
    paths = [f"id{i}/{k}.jpg" for i in range(6) for k in range(3)]
    paths[4] = "/abs/1.jpg"                    # absolute
    paths[5] = "id1/../id0/0.jpg"              # escapes with ..
    paths[7] = "id0/1.jpg"                     # duplicate of row 1
    paths[8] = "lonely.jpg"                    # no identity folder
    spec = make_arrays(tmp_path / "a", paths=paths)
    attrs = np.load(spec["attributes"])
    attrs[10, 2] = np.nan
    np.save(spec["attributes"], attrs)
    spec["shard_size"] = 5
    counts = build_cast_manifest(spec, tmp_path / "manifest.parquet")
    m = pd.read_parquet(tmp_path / "manifest.parquet")
    assert len(m) == 18 and m["row"].tolist() == list(range(18))
    assert counts == {"ok": 13, "outside_root": 2, "duplicate": 1, "no_identity": 1,
                      "nan_attribute": 1}
    st = dict(zip(m["row"], m["status"], strict=True))
    assert (st[4], st[5], st[7], st[8], st[10]) == ("outside_root", "outside_root",
                                                    "duplicate", "no_identity", "nan_attribute")
    assert "['age']" in m.loc[10, "message"] and m.loc[7, "image_id"] == "id0/1.jpg//dup1"
    assert m["image_id"].is_unique and m.loc[0, "image_id"] == "id0/0.jpg"
    assert m.loc[0, "identity"] == "id0" and m.loc[8, "identity"] == ""
    assert m["exclude"].tolist() == np.load(spec["exclude_mask"]).tolist()
    assert read_shard_ids(tmp_path / "manifest.parquet") == ["00000", "00001", "00002",
                                                             "00003"]
    assert '"duplicate": 1' in read_metadata(tmp_path / "manifest.parquet")[
        "facecast.status_counts"]
    write_cast_attributes(spec, tmp_path / "manifest.parquet", tmp_path / "attributes.parquet")
    a = pd.read_parquet(tmp_path / "attributes.parquet")
    assert list(a.columns) == ["image_id", "identity", "split", "exclude", "status",
                               "message", *COLUMNS]
    np.testing.assert_array_equal(a[COLUMNS].to_numpy(), attrs.astype(np.float64))
    assert (a["status"] == m["status"]).all()
    assert pq.ParquetFile(tmp_path / "attributes.parquet").num_row_groups == 4


def test_bad_arrays_fail_before_any_job_naming_the_key(tmp_path):
    spec = make_arrays(tmp_path / "a")
    assert array_errors("w", spec) == []
    (tmp_path / "a" / "columns.csv").write_text("a,b\n")
    assert "datasets.w.columns" in array_errors("w", spec)[0]
    assert "names 2 columns but the attribute array has 3" in array_errors("w", spec)[0]
    (tmp_path / "a" / "columns.csv").unlink()
    assert "never guessed" in array_errors("w", spec)[0]
    (tmp_path / "a" / "columns.csv").write_text("\n".join(COLUMNS))   # one per row is fine
    assert open_cast_arrays(spec).columns == COLUMNS
    np.save(spec["paths"], np.array(["x/1.jpg"] * 7))
    assert "has 7 rows but the attribute array" in array_errors("w", spec)[0]
    np.save(spec["paths"], np.array([object()] * 200, dtype=object), allow_pickle=True)
    assert "without unpickling" in array_errors("w", spec)[0]
    make_arrays(tmp_path / "a")
    np.save(spec["attributes"], np.array([["a"] * 3] * 200))
    assert "must be numeric" in array_errors("w", spec)[0]
    make_arrays(tmp_path / "a")
    np.save(spec["exclude_mask"], np.zeros(200, np.int64))
    assert "datasets.w.exclude_mask" in array_errors("w", spec)[0]
    with pytest.raises(DatasetError, match="booleans"):
        open_cast_arrays(spec)


def test_config_check_names_the_cast_arrays_key(tmp_path):
    spec = make_arrays(tmp_path / "a")
    (tmp_path / "a" / "columns.csv").write_text("a,b\n")
    cfg = {"datasets": {"web": spec}, "embed": {"models": {}},
           "benchmarks": {"b": {"cast_filters": [["nope", "rank", 50, 101]]}},
           "export": {"train_subsets": {"t": {"benchmark": "x"}}}}
    resolve_config(cfg, SCHEMA)
    with pytest.raises(ConfigError) as exc:
        check_config(cfg)
    text = str(exc.value)
    assert "datasets.web.columns:" in text
    assert "benchmarks.b.cast_filters[0]: rank bounds are percents 0-100" in text
    assert "export.train_subsets.t.benchmark: 'x' is not a benchmark" in text
    assert "export.train_subsets.t.format: recordio copies the images" in text


# ----------------------------------------------------------------- CAST's filters


def cast_filter_reference(attr, columns, train_set, tuples):
    """CAST's filter.py, written out independently: exclusion first, masks multiplied."""
    mask = ~train_set
    for t in tuples:
        col = attr[:, columns.index(t[0])]
        if len(t) == 2:
            m = col == t[1]
        elif t[1] == "abs":
            m = (col > t[2]) * (col < t[3])
        else:
            ranked = np.argsort(col)
            m = np.zeros(len(col), bool)
            m[ranked[round(len(col) * t[2] / 100):round(len(col) * t[3] / 100) - 1]] = True
        mask = mask * m
    return mask


@pytest.mark.parametrize("tuples", [
    [["Heavy_Makeup", "rank", 50, 100], ["vitor_gender", 0]],
    [["age", "abs", 35, 45]],
    [["Heavy_Makeup", "rank", 0, 20], ["age", "rank", 67, 100]],
    [["age", "rank", 0, 0]],
    [["Heavy_Makeup", "rank", 10, 100], ["Heavy_Makeup", "rank", 0, 80]],  # one argsort
])
def test_cast_tuples_select_what_casts_filter_py_selects(tmp_path, tuples):
    spec = make_arrays(tmp_path / "a", n_ids=60, per=7, seed=5)
    arrays = open_cast_arrays(spec)
    pool = ~arrays.exclude_mask()
    filters = parse_cast_filters(tuples, "b")
    for workers in (1, 2):
        mask, report = select_from_arrays(arrays, spec["attributes"], filters, pool,
                                          workers=workers)
        ref = cast_filter_reference(np.load(spec["attributes"]), COLUMNS,
                                    np.load(spec["exclude_mask"]), tuples)
        np.testing.assert_array_equal(mask, ref)
        assert report["n_subset"] == ref.sum()


def test_two_tuples_on_one_column_sort_it_once(tmp_path, monkeypatch):
    spec = make_arrays(tmp_path / "a", n_ids=60, per=7, seed=5)  # Heavy_Makeup: 5 values
    arrays = open_cast_arrays(spec)
    calls = []
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda *a, **k: calls.append(1) or argsort(*a, **k))
    tuples = [["Heavy_Makeup", "rank", 10, 100], ["Heavy_Makeup", "rank", 0, 80]]
    mask, _ = select_from_arrays(arrays, spec["attributes"], parse_cast_filters(tuples),
                                 ~arrays.exclude_mask())
    assert len(calls) == 1                    # both slices cut a tie: one sort serves both
    monkeypatch.setattr(np, "argsort", argsort)
    ref = cast_filter_reference(np.load(spec["attributes"]), COLUMNS,
                                np.load(spec["exclude_mask"]), tuples)
    np.testing.assert_array_equal(mask, ref)


def test_rank_slice_fast_path_equals_argsort_with_ties_and_nan():
    """Default: CAST's argsort exactly; row_order: the stable argsort, without sorting."""
    rng = np.random.default_rng(11)
    for trial in range(400):
        n = int(rng.integers(1, 300))
        v = (rng.integers(0, 5, n) if trial % 3 == 0 else rng.random(n)).astype(np.float32)
        if trial % 3 == 2:
            v[rng.random(n) < 0.3] = np.nan
        lo = float(rng.choice([0, 10, 33, 50, 67, 80, 90]))
        hi = float(rng.choice([lo, 0, 20, 50, 90, 100]))
        cut = slice(round(n * lo / 100), round(n * hi / 100) - 1)
        ref = np.zeros(n, bool)
        ref[np.argsort(v)[cut]] = True
        np.testing.assert_array_equal(cast_rank_select(v, lo, hi), ref)
        stable = np.zeros(n, bool)                  # cast_ties: row_order, linear time
        stable[np.argsort(v, kind="stable")[cut]] = True
        np.testing.assert_array_equal(cast_rank_select(v, lo, hi, "row_order"), stable)


@pytest.mark.parametrize("kind", ["U", "S"])
def test_selected_paths_read_in_blocks_equal_numpy(tmp_path, kind):
    """Block reads + vectorised conversion give numpy's strings and os.path.dirname
    folders: fixed and varying widths, nested and missing folders, non-ASCII (U only)."""
    rng = np.random.default_rng(3)
    paths = [f"0_0_{i // 3:07d}/{i % 3}.jpg" for i in range(300)]
    odd = ["a/b/c.jpg", "x.jpg", "", "dir/", "d/e\x00f.jpg", "long_folder_name/1.jpg",
           "q/" + "z" * 30, "é/ü.jpg"]
    for i, p in zip(rng.choice(300, len(odd), replace=False), odd, strict=True):
        paths[i] = p
    for variant in (paths[:200], paths):     # fixed-width folders only, then mixed
        arr = np.array(variant) if kind == "U" else np.array([p.encode() for p in variant])
        np.save(tmp_path / "p.npy", arr)
        ref = arr if kind == "U" else np.char.decode(arr, "utf-8")
        for rows in (np.arange(len(arr)), np.sort(rng.choice(len(arr), 37, replace=False)),
                     np.array([len(arr) - 1])):
            got = list(read_path_blocks(tmp_path / "p.npy", rows, block=16))
            ids = [s for b in got for s in b[0].to_pylist()]
            folders = [s for b in got for s in b[1].to_pylist()]
            assert ids == ref[rows].tolist()
            assert folders == [p.rsplit("/", 1)[0] if "/" in p else "" for p in ids]
            heads = {s for b in got for s in b[1].filter(b[2]).to_pylist()}
            assert heads == set(folders)               # every identity has a head row
            np.testing.assert_array_equal(np.concatenate(
                [span[p] for span, p in read_spans(tmp_path / "p.npy", rows, block=16)]),
                arr[rows])
        assert path_arrays(arr)[0].to_pylist() == ref.tolist()
    cols = np.random.default_rng(1).random((1000, 5)).astype(np.float32)
    np.save(tmp_path / "c.npy", cols)
    for got, j in zip(read_columns(tmp_path / "c.npy", [4, 0, 4]), [4, 0, 4], strict=True):
        np.testing.assert_array_equal(got, cols[:, j])


def test_description_and_subset_of_an_arrays_benchmark(tmp_path):
    spec = make_arrays(tmp_path / "a")
    build_cast_manifest(spec, tmp_path / "manifest.parquet")
    bench = {"cast_filters": [["Heavy_Makeup", "rank", 50, 100], ["vitor_gender", 0]]}
    report = build_array_subset(spec, tmp_path / "manifest.parquet", bench,
                                tmp_path / "s.parquet", tmp_path / "description.txt",
                                bench="b", statuses=["ok"])
    text = (tmp_path / "description.txt").read_text().splitlines()
    assert text[:2] == ["attribute: Heavy_Makeup lower_quartile: 50 upper_quartile: 100",
                        "attribute: vitor_gender lower_quartile: 0 upper_quartile: 0"]
    assert text[2].startswith("# facecast:") and "dropped" in text[2]
    sub = pd.read_parquet(tmp_path / "s.parquet")
    assert len(sub) == report["n_subset"] > 0
    mask = np.load(spec["exclude_mask"])
    assert not mask[sub["row"]].any()                 # excluded rows never enter
    paths = np.load(spec["paths"])
    assert sub["image_id"].tolist() == paths[sub["row"]].tolist()
    assert (sub["identity"] == sub["image_id"].str.rsplit("/", n=1).str[0]).all()
    assert describe_filters(parse_cast_filters([["age", "abs", 1, 2.5]])) == \
        "attribute: age lower_quartile: 1 upper_quartile: 2.5\n"
    # facecast's own filters work on the arrays too: ranks over the pool, ties kept together
    build_array_subset(spec, tmp_path / "manifest.parquet",
                       {"filters": [{"attribute": "Heavy_Makeup", "low": 0.5, "high": 1}]},
                       tmp_path / "t.parquet", tmp_path / "t.txt", bench="t", statuses=["ok"])
    t = pd.read_parquet(tmp_path / "t.parquet")
    vals = np.load(spec["attributes"])[:, 0][~mask]
    assert set(t["Heavy_Makeup"]) == {v for v in set(vals.tolist())
                                      if (vals < v).sum() + ((vals == v).sum() - 1) / 2
                                      >= 0.5 * (len(vals) - 1)}
    tied = build_array_subset(spec, tmp_path / "manifest.parquet",
                              {**bench, "cast_ties": "row_order"}, tmp_path / "r.parquet",
                              tmp_path / "r.txt", bench="r", statuses=["ok"])
    col = np.sort(np.load(spec["attributes"])[:, 0])
    start, stop = round(len(col) * 0.5), len(col) - 1
    changed = set(sub["row"]) ^ set(pd.read_parquet(tmp_path / "r.parquet")["row"])
    ends = {col[start], col[stop - 1]}             # rows differ only within a cut tie
    assert all(np.load(spec["attributes"])[r, 0] in ends for r in changed)
    assert tied["n_subset"] > 0
    with pytest.raises(FilterError, match="percents"):
        parse_cast_filters([["age", "rank", 0.5, 101]])


# ------------------------------------------------------------ CAST's random lists


def test_cast_random_pairs_follow_subset_tool_without_its_bugs():
    ident = np.repeat([f"id{i}" for i in range(30)], [1 + i % 4 for i in range(30)])
    ids = np.array([f"{p}/{k}.jpg" for k, p in enumerate(ident)])
    cfg = MiningConfig(mode="cast_random", n_genuine=2, n_impostor=3, on_shortfall="write")
    res = cast_random_pairs(ids, ident, cfg, [1, 2])
    p = res.pairs
    gen, imp = p[p.label == 1], p[p.label == 0]
    row = {v: k for k, v in enumerate(ids)}
    starts = set(identity_runs(ident).tolist())
    for a, b in zip(gen.image_a, gen.image_b, strict=True):       # first two rows of a run
        assert row[b] == row[a] + 1 and row[a] in starts and ident[row[a]] == ident[row[b]]
    assert gen["identity_a"].is_unique                            # one pair per identity run
    assert (imp.identity_a != imp.identity_b).all()
    used = pd.concat([imp.image_a, imp.image_b])
    assert used.is_unique                                         # no image reused
    assert p.groupby("fold").label.agg(["sum", "size"]).eq([2, 5]).all().all()
    assert len(p.fold.unique()) == 11 and not res.report["shortfall"]
    again = cast_random_pairs(ids, ident, cfg, [1, 2]).pairs
    pd.testing.assert_frame_equal(p, again)                       # seeded
    # a subset that cannot supply the pairs stops (CAST loops forever) and says so
    one = np.array(["a"] * 6)
    short = cast_random_pairs(np.array([f"a/{k}" for k in range(6)]), one, cfg, [1])
    assert short.report["shortfall"] and short.report["impostor"]["selected"] == 0
    assert short.report["genuine"]["selected"] == 0               # one run, 11 folds


# -------------------------------------------------------------- the workflow


def test_workflow_runs_cast_arrays_without_faces_or_embeddings(tmp_path):
    spec = make_arrays(tmp_path / "data", n_ids=60, per=5)
    cfg = {"seed": 4, "datasets": {"web": spec}, "embed": {"models": {}},
           "mining": {"mode": "cast_random", "n_genuine": 2, "n_impostor": 2},
           "benchmarks": {"makeup": {"cast_filters": [["Heavy_Makeup", "rank", 50, 100]]}},
           "export": {"train_subsets": {"bal": {"benchmark": "makeup", "format": "list",
                                                "balance_by": "vitor_gender"}}}}
    work = tmp_path / "run"
    targets = ["results/web/plan.md", "results/web/attributes.parquet",
               "results/web/train_subsets/bal/selection.parquet",
               "results/web/benchmarks/makeup/0.list"]
    run_snakemake(work, copy.deepcopy(cfg), targets=targets)
    res = work / "results" / "web"
    assert not (res / "faces").exists() and not (res / "embed").exists()
    assert (res / "attributes.parquet").is_file()
    lines = (res / "benchmarks" / "makeup" / "0.list").read_text().splitlines()
    assert [ln.split()[2] for ln in lines] == ["1", "1", "0", "0"]
    mask = np.load(spec["exclude_mask"])
    excluded = set(np.load(spec["paths"])[mask].tolist())
    for f in (res / "benchmarks").glob("*/*.list"):
        assert not excluded & set(f.read_text().split())
    lst = (res / "train_subsets" / "bal" / "train.lst").read_text().split()
    assert lst and not excluded & set(lst)
    plan = (work / "results" / "web" / "plan.md").read_text()
    assert "kind cast_arrays" in plan
    # with root and a reference model, hard pairs embed only the union of the pools: the
    # DAG goes through checkpoint pool_manifest, never faces on the whole manifest
    root = tmp_path / "webface"
    root.mkdir()
    cfg["datasets"]["web"]["root"] = str(root)
    cfg["embed"] = {"models": {"lbp": {"backend": "lbp"}}}
    cfg["benchmarks"]["makeup"]["mining"] = {"mode": "band"}
    dry = run_snakemake(work, copy.deepcopy(cfg), extra=["-n"])
    jobs = {ln.split()[0] for ln in dry.stdout.splitlines() if re.match(r"^\w+\s+\d+$", ln)}
    assert "pool_manifest" in jobs and "mine_pairs" in jobs and "faces" not in jobs


def test_pool_manifest_is_the_union_of_the_benchmark_subsets(tmp_path):
    from facecast.datasets.cast_manifest import write_pool_manifest

    spec = make_arrays(tmp_path / "a")
    build_cast_manifest(spec, tmp_path / "manifest.parquet")
    for name, t in (("a", [["vitor_gender", 0]]), ("b", [["Heavy_Makeup", "abs", 0.4, 1]])):
        build_array_subset(spec, tmp_path / "manifest.parquet", {"cast_filters": t},
                           tmp_path / f"{name}.parquet", tmp_path / f"{name}.txt", bench=name,
                           statuses=["ok"])
    n = write_pool_manifest(tmp_path / "manifest.parquet",
                            [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")],
                            tmp_path / "pool.parquet", shard_size=30)
    pool = pd.read_parquet(tmp_path / "pool.parquet")
    union = set(pd.read_parquet(tmp_path / "a.parquet")["row"]) | set(
        pd.read_parquet(tmp_path / "b.parquet")["row"])
    assert n == len(pool) == len(union) and set(pool["row"]) == union
    assert read_shard_ids(tmp_path / "pool.parquet") == [f"{k:05d}" for k in
                                                         range((n + 29) // 30)]
    full = pd.read_parquet(tmp_path / "manifest.parquet").set_index("row")
    assert (pool.set_index("row")["image_id"] == full.loc[pool["row"], "image_id"]).all()


# -------------------------------------------------------------- training subsets


def read_rec(rec: Path, idx: Path) -> dict[int, tuple[int, list[float], bytes]]:
    """A minimal insightface RecordIO reader, independent of facecast's: record id ->
    (flag, labels, image bytes). Single-part records only (what small payloads are)."""
    import struct

    out = {}
    data = rec.read_bytes()
    for line in idx.read_text().splitlines():
        key, off = map(int, line.split("\t"))
        magic, lrec = struct.unpack_from("<II", data, off)
        assert magic == 0xCED7230A and lrec >> 29 == 0
        payload = data[off + 8: off + 8 + (lrec & ((1 << 29) - 1))]
        flag, label, _, _ = struct.unpack_from("<IfQQ", payload)
        labels = list(struct.unpack_from(f"<{flag}f", payload, 24)) if flag else [label]
        out[key] = (flag, labels, payload[24 + 4 * flag:])
    return out


def test_training_subset_recordio_reads_back_balanced_without_excluded_rows(tmp_path):
    from facecast.analysis.stage import build_train_subset

    spec = make_arrays(tmp_path / "a", n_ids=40, per=6, seed=2)
    root = tmp_path / "webface"
    paths = np.load(spec["paths"])
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(b"\xff\xd8jpeg:" + p.encode() + bytes(range(7)))
    spec["root"] = str(root)
    attrs = np.load(spec["attributes"])
    attrs[:, 1] = np.repeat(np.arange(40) % 3 == 0, 6)        # gender per identity, 1 in 3
    attrs[3, 1] = 1 - attrs[3, 1]                             # one noisy image
    np.save(spec["attributes"], attrs)
    build_cast_manifest(spec, tmp_path / "manifest.parquet")
    build_array_subset(spec, tmp_path / "manifest.parquet", {"filters": []},
                       tmp_path / "s.parquet", tmp_path / "d.txt", bench="random",
                       statuses=["ok"])
    cfg = {"benchmark": "random", "format": "recordio", "balance_by": "vitor_gender",
           "per_class": "equal", "min_images_per_identity": 3, "max_images_per_identity": 4}
    out = tmp_path / "ts"
    report = build_train_subset(tmp_path / "s.parquet", tmp_path / "manifest.parquet", None,
                                spec, cfg, out, name="bal", dataset_dir=tmp_path, seed=9)
    recs = read_rec(out / "train.rec", out / "train.idx")
    flag, (a, b), _ = recs[0]
    assert flag == 2 and int(a) - 1 == report["n_images"]
    images = {k: recs[k] for k in range(1, int(a))}
    labels = np.array([int(v[1][0]) for v in images.values()])
    n_classes = int(b - a)
    assert n_classes == report["n_identities"] == labels.max() + 1
    assert (np.diff(labels) >= 0).all()                        # grouped by label
    for c in range(n_classes):                                 # identity records
        lo, hi = recs[int(a) + c][1]
        assert (labels[int(lo) - 1:int(hi) - 1] == c).all()
    sel = pd.read_parquet(out / "selection.parquet")
    excluded = set(paths[np.load(spec["exclude_mask"])].tolist())
    assert not excluded & set(sel["path"])
    for k, (_, lab, img) in images.items():                    # bytes copied unchanged
        row = sel.iloc[k - 1]
        assert int(lab[0]) == row["label"] and img == (root / row["path"]).read_bytes()
    per_class = sel.groupby("class").size()
    assert len(per_class) == 2 and per_class.nunique() == 1 and not report["shortfall"]
    assert sel.groupby("identity").size().between(3, 4).all()
    assert (out / "property").read_text() == f"{n_classes},112,112\n"
    cfg_list = {**cfg, "format": "list"}
    build_train_subset(tmp_path / "s.parquet", tmp_path / "manifest.parquet", None, spec,
                       cfg_list, tmp_path / "tl", name="bal", dataset_dir=tmp_path, seed=9)
    lst = (tmp_path / "tl" / "train.lst").read_text().splitlines()
    assert [ln.split("\t")[2] for ln in lst] == sel["path"].tolist()   # same seed, same set


def test_sorted_at_equals_np_sort():
    """The bracketed order statistics are np.sort's values: ties, signed zeros, NaN rows,
    infinities, ordered columns, positions at both ends and in the middle."""
    from facecast.analysis.order_stats import sorted_at

    rng = np.random.default_rng(3)
    n = 300_000
    cases = [rng.random(n, dtype=np.float32),
             rng.integers(0, 50, n).astype(np.float32),
             np.where(rng.random(n) < .5, np.float32(-0.0), np.float32(0.0))
             + (rng.random(n) < .3).astype(np.float32),
             np.where(rng.random(n) < .2, np.nan, rng.random(n)).astype(np.float32),
             np.sort(rng.random(n)),
             np.sort(rng.random(n)).astype(np.float32)[::-1].copy(),
             np.repeat(rng.random(n // 21 + 1), 21)[:n].astype(np.float32),
             np.concatenate([np.full(1000, -np.inf), rng.random(n - 2000),
                             np.full(1000, np.inf)]).astype(np.float32)]
    for v in cases:
        s = np.sort(v)
        for ks in ([0, 1, n - 2, n - 1], [n // 10 - 1, n // 10, n - 2, n - 1],
                   [5, 6, 7000, 7001], [n // 2 - 1, n // 2, n // 2 + 1]):
            got = sorted_at(v, ks)
            for k in ks:
                assert got[k] == s[k] or (np.isnan(got[k]) and np.isnan(s[k]))


def test_folder_keys_count_distinct_folders():
    """Two 64-bit keys per fixed-width folder: equal iff the bytes are, counted in or out
    of order."""
    from facecast.datasets.cast_paths import distinct_keys, folder_keys

    rng = np.random.default_rng(4)
    for width in (8, 11, 16):
        words = rng.integers(48, 50, (500, width), dtype=np.uint8)
        for rows in (words, words[np.lexsort(words.T[::-1])]):
            keys = folder_keys(np.ascontiguousarray(rows))
            assert distinct_keys(keys) == len({r.tobytes() for r in rows})
    assert folder_keys(np.zeros((3, 7), np.uint8)) is None
