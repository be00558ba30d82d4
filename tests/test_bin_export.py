"""Mined benchmarks as insightface verification .bin files (issues 34.1-2, 39).

The data is built the way the pipeline leaves it (``tests/reference/bin_inputs.py``): a
faces shard of 112 px PNG crops and benchmarks' ``pairs.parquet`` in the mining layout.
The exports are compared with what the references did with the very same files, recorded
from their checkouts (``tests/reference/insightface_recorder.py``,
``tests/reference/cc11_recorder.py``; docs/CONTRIBUTING.md, "Reference records"):
insightface's ``load_bin`` and ``evaluate`` (``tests/data/reference/insightface/``),
CAST ``cc11.py``'s block cutting and the layout of CAST's real ``.list`` files
(``tests/data/reference/cc11/``). No reference code is in this repository.
"""

from __future__ import annotations

import json
import logging
import pickle
import pickletools
import re
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from reference.bin_inputs import (
    CC11,
    EXPORTS,
    crops,
    export,
    file_digest,
    image_digest,
    lbp_embed,
    lfw_like,
    roc_case,
    write_run,
)
from reference.common import read_record
from sklearn.model_selection import KFold

from facecast.analysis.bin_checks import bin_export_errors, fold_class_gaps
from facecast.analysis.bin_writer import write_bin_stream
from facecast.analysis.bins import (
    BinExportError,
    bin_pair_order,
    build_blocks,
    export_bin,
    kfold_sizes,
)
from facecast.analysis.exports import cast_val_order
from facecast.config.bin_sets import bin_spec_errors, implied_protocols
from facecast.datasets.insightface_bin import load_bin, read_insightface_bin
from facecast.datasets.manifest import DatasetError
from facecast.evaluate.bin_protocol import bin_pairs
from facecast.evaluate.metrics import default_folds, kfold_accuracy
from facecast.evaluate.scoring import cosine_rows
from facecast.faces.aligned import aligned_row
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png
from facecast.faces.decode import DecodedImage
from facecast.io.parquet_io import read_parquet, write_parquet


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The faces shard and the mined benchmarks on disk (bin_inputs.write_run)."""
    return write_run(tmp_path_factory.mktemp("bins"))


def _exported(run, name):
    """An export of bin_inputs.EXPORTS, made once per module."""
    cache = run.setdefault("exports", {})
    if name not in cache:
        cache[name] = export(run, name)
    return cache[name]


def _record(name: str) -> dict:
    return read_record("insightface", f"load_bin_{name}")["outputs"]


def _facecast_accuracy(run, side: pd.DataFrame, folds: np.ndarray):
    """facecast's 10-fold accuracy of the pairs of ``side`` on the LBP embeddings."""
    ea = lbp_embed(np.stack([run["crops"][i] for i in side["image_a"]]))
    eb = lbp_embed(np.stack([run["crops"][i] for i in side["image_b"]]))
    return kfold_accuracy(cosine_rows(ea, eb), side["label"].to_numpy(), folds)


# -------------------------------------------------------------------------- the order


def _runs(labels) -> list[list[int]]:
    out: list[list[int]] = []
    for lab in np.asarray(labels).tolist():
        if out and out[-1][0] == lab:
            out[-1][1] += 1
        else:
            out.append([lab, 1])
    return out


def _mined(n_folds: int, n_gen: int, n_imp: int, val: bool) -> pd.DataFrame:
    """A benchmark's pairs in the mining layout (genuine then impostor per fold)."""
    rows = []
    for f in ["val"] if val else [str(k) for k in range(n_folds)]:
        rows += [(f"g{f}_{k}", 1, f) for k in range(n_gen)]
        rows += [(f"i{f}_{k}", 0, f) for k in range(n_imp)]
    df = pd.DataFrame(rows, columns=["image_a", "label", "fold"])
    return df.assign(image_b=df["image_a"] + "b", identity_a="x", identity_b="y")


def test_pair_order_is_the_layout_of_casts_real_lists():
    """CAST's val.list files are ten runs of 50 genuine then 50 impostor pairs, its
    k.list files 500 genuine then 500 impostor: a block of the held-out fold (500 + 500)
    and of ten test folds (10 x (500 + 500)), as facecast lays them out, has exactly those
    label runs, insightface fold k = benchmark fold k; CAST-format val.list files written
    by facecast (cast_val_order) too."""
    lists = read_record("cc11", "cc11_lists")["outputs"]
    assert sorted(lists) == sorted(CC11)
    val = _runs(build_blocks({"b": _mined(10, 500, 500, val=True)}, folds="val")["label"])
    test = build_blocks({"b": _mined(10, 500, 500, val=False)})
    assert (test["fold"] == test["benchmark_fold"]).all()
    labels = np.r_[np.ones(500), np.zeros(500)].astype(int)
    written = _runs(labels[cast_val_order(labels)])
    for name, files in lists.items():
        assert val == files["val"]["runs"] == written, name
        want = _runs(sum(([lab] * n for k in range(10)
                          for lab, n in files[str(k)]["runs"]), []))
        assert _runs(test["label"]) == want, name


@pytest.mark.parametrize("n_gen,n_imp", [(23, 41), (5, 15), (1, 30), (37, 0), (9, 2)])
def test_every_insightface_fold_gets_its_share_of_both_classes(n_gen, n_imp):
    labels = np.r_[np.ones(n_gen), np.zeros(n_imp)].astype(int)
    order = bin_pair_order(labels)
    assert sorted(order.tolist()) == list(range(len(labels)))
    ordered = labels[order]
    folds = list(KFold(n_splits=10, shuffle=False).split(np.arange(len(labels))))
    assert [len(t) for _, t in folds] == kfold_sizes(len(labels)).tolist()
    for _, test in folds:
        share = n_gen * len(test) / len(labels)
        got = int(ordered[test].sum())
        assert abs(got - share) < 1.0 + 1e-9
        assert np.all(np.diff(ordered[test]) <= 0)   # genuine run, then impostor run


def test_band_blocks_keep_the_benchmarks_folds(run):
    rows = build_blocks({"black": run["pairs"]["black"]})
    assert (rows["fold"] == rows["benchmark_fold"]).all()
    assert len(rows) == 60 and "val" not in set(rows["benchmark_fold"])
    # the held-out fold has 6 pairs: four of insightface's ten folds would be empty
    with pytest.raises(BinExportError, match=r"block black \(fold 0: 1 genuine / 0 "
                                             r"impostor.*fold 9: 0 genuine / 0 impostor\)"):
        build_blocks({"black": run["pairs"]["black"]}, folds="val", name="v")


def test_a_fold_without_both_classes_stops_naming_the_block():
    """5 genuine pairs in a block of 100: insightface's calculate_val_far divides by zero
    on exactly the folds facecast's error names (recorded), and the config check predicts
    the same folds before any job."""
    _, _, y = roc_case("one_class_fold")
    rec = read_record("insightface", "evaluate_cases")["outputs"]["one_class_fold"]
    failed = [k for k, v in enumerate(rec["val_far_per_fold"]) if isinstance(v, str)]
    assert failed and all("ZeroDivisionError" in rec["val_far_per_fold"][k] for k in failed)
    pairs = pd.DataFrame({"image_a": [f"a{k}" for k in range(100)], "image_b": "b",
                          "identity_a": "x", "identity_b": "y", "fold": "0",
                          "label": np.r_[np.ones(5), np.zeros(95)].astype(int)})
    with pytest.raises(BinExportError) as err:
        build_blocks({"thin": pairs}, name="x")
    named = [int(f) for f in re.findall(r"fold (\d): 0 genuine", str(err.value))]
    assert "export.bins.x: block thin" in str(err.value) and named == failed
    assert (np.asarray(y, int) == pairs["label"].to_numpy()[bin_pair_order(
        pairs["label"].to_numpy())]).all()                      # the layout recorded
    gaps = [int(g.split()[1].rstrip(":")) for g in fold_class_gaps(100, 5)]
    assert gaps == failed
    cfg = _config(x={"benchmarks": ["a"], "block_size": 15})
    errs = bin_export_errors(cfg)
    assert len(errs) == 1 and errs[0].startswith("export.bins.x: block a (15 pairs, 8 genuine)")
    assert "fold 5: 1 genuine / 0 impostor" in errs[0] and "fold 6: 0 genuine" in errs[0]


# ------------------------------------------------------- read back by insightface itself


@pytest.mark.parametrize("name", list(EXPORTS))
def test_insightface_load_bin_reads_exactly_the_exported_pairs(run, name):
    """insightface's load_bin read these very bytes (same sha256) and got the pairs'
    labels and, image for image, the crops the faces stage stored (PNG: the same pixels;
    JPEG: what facecast's own decoder reads)."""
    path, meta = _exported(run, name)
    rec = _record(name)
    assert file_digest(path) == rec["bin_sha256"], (
        "the export's bytes changed since insightface read them: re-record "
        "(docs/CONTRIBUTING.md, Reference records)")
    side = read_parquet(path.with_name(f"{name}.pairs.parquet"))
    assert rec["issame"] == (side["label"] == 1).tolist()
    assert rec["n_images"] == 2 * len(side) and rec["integral"]
    images, issame = load_bin(path)                        # facecast's restricted reader
    assert issame.tolist() == rec["issame"]
    if meta["encoding"] == "png":
        ours = [run["crops"][i] for ab in zip(side["image_a"], side["image_b"], strict=True)
                for i in ab]
        assert all(b[:8] == b"\x89PNG\r\n\x1a\n" for b in images)
    else:
        ours = [decode_png(b) if b[:4] == b"\x89PNG" else _jpeg_rgb(b) for b in images]
        assert all(b[:3] == b"\xff\xd8\xff" for b in images)
    assert [image_digest(a.transpose(2, 0, 1)) for a in ours] == rec["image_digests"]


def _jpeg_rgb(data: bytes) -> np.ndarray:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def test_one_benchmark_export_and_its_sidecars(run):
    path, meta = _exported(run, "black_test")
    bench = run["pairs"]["black"]
    test = bench[bench["fold"] != "val"]
    side = read_parquet(path.with_name("black_test.pairs.parquet"))
    assert side["pair_index"].tolist() == list(range(len(test)))
    assert sorted(zip(side["image_a"], side["image_b"], side["label"], strict=True)) == \
        sorted(zip(test["image_a"], test["image_b"], test["label"], strict=True))
    assert meta["blocks"] == [{"name": "black", "source": meta["blocks"][0]["source"],
                               "folds": "test", "n_pairs": 60, "n_genuine": 30,
                               "n_impostor": 30, "first_pair": 0, "first_image": 0,
                               "n_available": 60}]
    on_disk = json.loads(path.with_name("black_test.json").read_text())
    assert on_disk == meta and meta["config_hash"] == "abc123" and meta["facecast_version"]
    assert (meta["image_size"], meta["encoding"]) == (112, "png")
    assert meta["n_unique_images"] == len(set(side["image_a"]) | set(side["image_b"]))
    assert meta["n_bytes"] == path.stat().st_size
    assert not (path.parent / ".tmp").exists()   # atomic writes leave nothing behind
    assert not [p for p in path.parent.iterdir() if p.name.startswith("tmp")]


@pytest.mark.parametrize("name", ["black_test", "cc3", "cc11"])
def test_insightface_accuracy_from_the_bin_equals_facecasts(run, name):
    """insightface's 10-fold accuracies, per fold, on the LBP embeddings of what its
    load_bin read from each block, equal facecast's on the same pairs with the
    insightface folds of the sidecar (with band mining: the benchmark's own folds)."""
    path, meta = _exported(run, name)
    side = read_parquet(path.with_name(f"{name}.pairs.parquet"))
    rec = _record(name)["blocks"]
    assert list(rec) == [b["name"] for b in meta["blocks"]]
    means = []
    for block, want in rec.items():
        part = side[side["block"] == block]
        ours = _facecast_accuracy(run, part, part["fold"].to_numpy())
        np.testing.assert_allclose(ours.accuracies, want["accuracy"], rtol=0, atol=1e-12)
        np.testing.assert_allclose([ours.mean, ours.std], [want["mean"], want["std"]],
                                   rtol=0, atol=1e-12)
        means.append(want["mean"])
    assert 0.5 < np.mean(means) < 1.0        # the pairs are neither trivial nor random
    if name == "black_test":                 # band mining: insightface fold = mining fold
        assert (side["fold"] == side["benchmark_fold"]).all()


@pytest.mark.parametrize("case", ["perfect", "grid_ties", "float32", "tiny_11", "tiny_23",
                                  "one_class_fold"])
def test_kfold_accuracy_equals_insightface_on_hostile_embeddings(case):
    """Perfect separation, distances exactly on insightface's threshold grid (ties at
    every threshold), float32 embeddings, 11 and 23 pairs (folds of one and two pairs),
    a fold of one class: facecast's per-fold accuracies are insightface's."""
    e1, e2, y = roc_case(case)
    want = read_record("insightface", "evaluate_cases")["outputs"][case]
    got = kfold_accuracy(cosine_rows(e1, e2), y.astype(int), default_folds(len(y)))
    np.testing.assert_allclose(got.accuracies, want["accuracy"], rtol=0, atol=1e-12)
    assert got.std == pytest.approx(want["std"], abs=1e-12)
    if case == "perfect":
        assert want["mean"] == 1.0
    if case == "grid_ties":  # every distance is a multiple of 1/4, on the grid
        d = 2 - 2 * cosine_rows(e1, e2)
        assert np.all(np.isin(d, np.r_[np.arange(0, 4, 0.01), 4.0]))
        assert len(np.unique(d)) > 8 and (d < 4).sum() > 150


def test_lfw_like_set_matches_insightface():
    issame, emb = lfw_like()
    want = read_record("insightface", "evaluate_cases")["outputs"]["lfw_like"]
    got = kfold_accuracy(cosine_rows(emb[0::2], emb[1::2]), issame.astype(int),
                         default_folds(len(issame)))
    np.testing.assert_allclose(got.accuracies, want["accuracy"], rtol=0, atol=1e-12)
    assert 0.6 < want["mean"] < 0.97


# -------------------------------------------------------------------- as cc11.py cuts it


def test_cc11_reads_an_eleven_block_export_block_by_block(run):
    """cc11.py (recorded) cut facecast's eleven-block export exactly at its blocks, in
    order, labelling each as the sidecar's cc11_labels says; facecast's layout: cc11
    reading cuts the same way."""
    path, meta = _exported(run, "cc11")
    assert meta["cc11_compatible"] is True and list(meta["cc11_labels"]) == CC11
    sliced = read_record("cc11", "cc11_slicing_cc11")["outputs"]
    assert sliced["sub_benchmarks"] == len(meta["blocks"]) == 11
    side = read_parquet(path.with_name("cc11.pairs.parquet"))
    for b, got in zip(meta["blocks"], sliced["blocks"], strict=True):
        assert got["label"] == meta["cc11_labels"][b["name"]]
        assert (got["first_image"], got["n_images"]) == (b["first_image"], 2 * b["n_pairs"])
        assert got["consecutive"] and got["nfolds"] == 10
        assert got["issame"] == (side.loc[side["block"] == b["name"], "label"] == 1).tolist()
    for i, b in enumerate(meta["blocks"]):
        ours = bin_pairs(path, layout="cc11", block=i)
        assert ours["pair_index"].iloc[0] == b["first_pair"] and len(ours) == b["n_pairs"]


@pytest.mark.parametrize("name", ["cc3", "black_test"])
def test_other_block_counts_say_cc11_would_mislabel_them(run, name, caplog):
    """cc11.py (recorded) cuts any .bin into eleven slices under its own names: on three
    blocks of 40 pairs its slices start inside pairs and straddle blocks. Such an export
    says cc11_compatible: false, and the log says why."""
    with caplog.at_level(logging.WARNING, logger="facecast.analysis.bins"):
        path, meta = export(run, name)
    assert meta["cc11_compatible"] is False and meta["cc11_labels"] is None
    assert json.loads(path.with_name(f"{name}.json").read_text())["cc11_compatible"] is False
    assert "cc11_compatible: false" in caplog.text and f"export.bins.{name}" in caplog.text
    sliced = read_record("cc11", "cc11_slicing_" + name)["outputs"]
    assert len(sliced["blocks"]) == 11
    edges = {b["first_image"] for b in meta["blocks"]}
    starts = [s["first_image"] for s in sliced["blocks"]]
    assert any(s % 2 for s in starts) or set(starts) != edges   # pairs or blocks cut


# ---------------------------------------------------------------- the streamed writer


def test_streamed_file_is_the_pickle_of_the_pairs(tmp_path):
    """Short and long images, repeats (memo references, past 256 entries too), more than
    one APPENDS batch: plain pickle and the restricted reader load exactly the lists, and
    pickletools walks the whole stream."""
    rng = np.random.default_rng(0)
    blobs = {f"i{k}": rng.bytes(int(n)) for k, n in enumerate(rng.integers(0, 700, 1300))}
    ids = [f"i{int(k)}" for k in rng.integers(0, 1300, 2600)]
    same = (rng.random(1300) < 0.5).tolist()
    stats = write_bin_stream(tmp_path / "s.bin", ids, same, blobs.__getitem__)
    data = (tmp_path / "s.bin").read_bytes()
    assert pickle.loads(data) == ([blobs[i] for i in ids], same)
    pickletools.dis(data, out=open(tmp_path / "dis.txt", "w"))
    images, issame = load_bin(tmp_path / "s.bin")
    assert images == [blobs[i] for i in ids] and issame.tolist() == same
    assert stats == {"n_images": 2600, "n_unique": len(set(ids)), "n_bytes": len(data)}
    assert len(data) < sum(len(blobs[i]) for i in set(ids)) + 12 * 2600   # each once
    with pytest.raises(ValueError, match="3 images for 2 pairs"):
        write_bin_stream(tmp_path / "bad.bin", ids[:3], same[:2], blobs.__getitem__)
    assert not (tmp_path / "bad.bin").exists()
    write_bin_stream(tmp_path / "empty.bin", [], [], blobs.__getitem__)
    assert pickle.loads((tmp_path / "empty.bin").read_bytes()) == ([], [])


def test_export_holds_one_crop_at_a_time(tmp_path):
    """600 distinct 30 kB crops (18 MB): the export's Python allocations peak far below
    the crops' total (they are spilled to disk and streamed), and the file has them all."""
    n, size = 600, 30_000
    rng = np.random.default_rng(5)
    ids = [f"p{k}/0.jpg" for k in range(n)]
    faces = pd.DataFrame({"image_id": ids, "status": "ok",
                          "crop_arcface": [rng.bytes(size) for _ in ids]})
    write_parquet(faces, tmp_path / "faces.parquet", row_group_size=64)
    fold = np.repeat([str(k) for k in range(10)], n // 20)
    lab = np.tile(np.r_[np.ones(n // 40), np.zeros(n // 40)].astype(int), 10)
    pairs = pd.DataFrame({"image_a": ids[0::2], "image_b": ids[1::2], "identity_a": "a",
                          "identity_b": "b", "label": lab, "fold": fold})
    write_parquet(pairs, tmp_path / "pairs.parquet")
    del faces
    tracemalloc.start()
    try:
        meta = export_bin({"m": tmp_path / "pairs.parquet"}, [tmp_path / "faces.parquet"],
                          tmp_path / "m.bin", name="m", cfg={"benchmarks": ["m"]}, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert meta["n_unique_images"] == n and meta["n_bytes"] > n * size
    assert peak < n * size / 4, f"peak {peak / 1e6:.1f} MB for {n * size / 1e6:.0f} MB of crops"
    images, issame = load_bin(tmp_path / "m.bin")
    assert len(images) == n and len(set(images)) == n and len(issame) == n // 2


# ----------------------------------------------------------------- read back by facecast


def test_facecast_reads_it_back_with_the_same_pairs_and_scores(run):
    path, _ = export(run, "black_rt", ["black"])
    spec = {"kind": "insightface_bin", "path": str(path), "layout": "blocks"}
    assert implied_protocols(spec) == ["black"] and bin_spec_errors("b", spec) == []
    manifest = read_insightface_bin(path, layout="blocks")       # restricted unpickler
    assert (manifest["status"] == "ok").all() and len(manifest) == 120
    images, issame = load_bin(path)
    pairs = bin_pairs(path, layout="blocks", block=0)
    assert pairs["fold"].tolist() == read_parquet(
        path.with_name("black_rt.pairs.parquet"))["fold"].tolist()
    # the faces stage on pre-aligned input (detector none, arcface112): the crop itself
    cfg = FacesConfig.from_mapping({"detector": "none", "crops": ["arcface"]})
    crops = []
    for b in images:
        arr = decode_png(b)
        row = aligned_row("x", DecodedImage(arr, "ok", "", 112, 112), cfg)
        crops.append(decode_png(row["crop_arcface"]))
    emb = lbp_embed(np.stack(crops))
    readback = (emb[0::2] * emb[1::2]).sum(1)
    side = read_parquet(path.with_name("black_rt.pairs.parquet"))
    ea = lbp_embed(np.stack([run["crops"][i] for i in side["image_a"]]))
    eb = lbp_embed(np.stack([run["crops"][i] for i in side["image_b"]]))
    np.testing.assert_array_equal(readback, (ea * eb).sum(1))    # identical, not close
    assert pairs["label"].tolist() == issame.astype(int).tolist()



# ------------------------------------------------------------------- several benchmarks


def test_unequal_blocks_stop_naming_their_sizes(run):
    with pytest.raises(BinExportError, match=r"black 60 pairs, random 102 pairs.*block_size \(at most 60\)"):
        export(run, "uneq", ["black", "random"])
    with pytest.raises(BinExportError, match="larger than benchmark 'black'"):
        export(run, "big", ["black", "random"], block_size=70)
    assert not list((run["dir"] / "bins").glob("uneq*")) + list(
        (run["dir"] / "bins").glob("big*"))



def test_missing_crops_stop_the_export_naming_them(run, tmp_path):
    lost = run["pairs"]["black"].copy()
    lost.loc[0, "image_a"] = "lost/0.jpg"
    lost.loc[1, "image_b"] = "nowhere/1.jpg"
    write_parquet(lost, tmp_path / "pairs.parquet")
    with pytest.raises(BinExportError, match=r"2 image\(s\).*lost/0\.jpg \(no_face\), "
                                             r"nowhere/1\.jpg \(not in the faces shards\)"):
        export_bin({"black": tmp_path / "pairs.parquet"}, run["faces"],
                   tmp_path / "x.bin", name="x", cfg={"benchmarks": ["black"]}, seed=0)
    assert not (tmp_path / "x.bin").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["pairs.parquet"]   # no spill left


def test_layout_blocks_needs_a_sidecar_that_fits(run, tmp_path):
    path, _ = export(run, "fits", ["black"])
    lone = tmp_path / "lone.bin"
    lone.write_bytes(path.read_bytes())
    spec = {"kind": "insightface_bin", "path": str(lone), "layout": "blocks"}
    errs = bin_spec_errors("d", spec)
    assert len(errs) == 1 and "datasets.d.layout" in errs[0] and "lone.json" in errs[0]
    side = json.loads(path.with_name("fits.json").read_text())
    side["blocks"][0]["n_pairs"] = 50
    lone.with_name("lone.json").write_text(json.dumps(side))
    with pytest.raises(DatasetError, match="sidecar's blocks hold 50"):
        read_insightface_bin(lone, layout="blocks")


# ------------------------------------------------------------------------ config checks


def _config(**bins) -> dict:
    return {"datasets": {"demo": {"kind": "synthetic"}},
            "embed": {"models": {"lbp": {"backend": "lbp"}}},
            "mining": {"reference_model": "lbp", "n_genuine": 50, "n_impostor": 50},
            "benchmarks": {"a": {}, "b": {"mining": {"n_genuine": 40}}, "c": {}},
            "export": {"bins": bins}}


def test_config_checks_name_the_key():
    assert bin_export_errors(_config(ok={"benchmarks": ["a", "c"]})) == []
    assert bin_export_errors(_config(ok={"benchmarks": ["a", "b"], "block_size": 900})) == []
    errs = bin_export_errors(_config(x={"benchmarks": ["a", "nope", "a"], "image_size": 160,
                                        "quality": 80}))
    assert any("export.bins.x.benchmarks[1]: 'nope' is not a benchmark" in e for e in errs)
    assert any("export.bins.x.benchmarks: a listed twice" in e for e in errs)
    assert any(e.startswith("export.bins.x.image_size: 160") for e in errs)
    assert any(e.startswith("export.bins.x.quality") for e in errs)
    errs = bin_export_errors(_config(x={"benchmarks": ["a", "b"]}))
    assert len(errs) == 1 and "a 1000, b 900 test pairs" in errs[0] and "block_size" in errs[0]
    errs = bin_export_errors(_config(x={"benchmarks": ["a"], "block_size": 2000}))
    assert errs and errs[0].startswith("export.bins.x.block_size: 2000")
    cfg = _config(x={"benchmarks": ["a"], "folds": "val"})
    cfg["mining"]["val_fold"] = False
    assert bin_export_errors(cfg)[0].startswith("export.bins.x.folds: val")
    cfg = _config(x={"benchmarks": ["a"]})
    cfg["datasets"] = {"lfw": {"kind": "insightface_bin", "path": "lfw.bin"}}
    assert "no dataset has mined pairs with aligned crops" in bin_export_errors(cfg)[0]


# ------------------------------------------------------------- through Snakemake, twice


@pytest.mark.slow
def test_pipeline_export_then_read_back_gives_the_same_scores(tmp_path):
    """Run 1 mines a benchmark on a folder of pre-aligned crops, evaluates dlib on it and
    exports the .bin; run 2 reads the .bin (kind insightface_bin, layout blocks) and
    evaluates the same model: every pair scores exactly as in run 1 (PNG lossless, and the
    embeddings do not depend on the batch they were computed in)."""
    import yaml
    from conftest import REPO, run_snakemake
    from PIL import Image

    root = tmp_path / "photos"
    for name, arr in crops().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(arr).save((root / name).with_suffix(".png"))
    cfg = yaml.safe_load((REPO / "config/own_photos.yaml").read_text())
    cfg["datasets"] = {"src": {"kind": "folder", "root": str(root), "shard_size": 10}}
    cfg["faces"] = {"detector": "none", "crops": ["arcface"]}
    cfg["mining"].update({"statuses": ["ok", "aligned_input"]})
    cfg["benchmarks"] = {"random": {"filters": [], "mining": {"mode": "all",
                                                              "n_impostor": 60}}}
    cfg["evaluate"] = {"models": ["dlib"], "benchmarks": ["random"]}
    cfg["fairness"].pop("protocols")
    cfg["export"] = {"bins": {"rt": {"benchmarks": ["random"]}}}
    run1 = tmp_path / "run1"
    run_snakemake(run1, cfg, ["results/src/bins/rt.bin", "results/src/eval/dlib/random.parquet"])
    path = run1 / "results/src/bins/rt.bin"
    side = read_parquet(path.with_name("rt.pairs.parquet"))
    back = dict(cfg, datasets={"back": {"kind": "insightface_bin", "path": str(path),
                                        "layout": "blocks"}},
                benchmarks={}, export={})
    back["evaluate"] = {"models": ["dlib"], "benchmarks": ["random"]}
    run_snakemake(tmp_path / "run2", back, ["results/back/eval/dlib/random.parquet"])
    first = read_parquet(run1 / "results/src/eval/dlib/random.parquet")
    again = read_parquet(tmp_path / "run2/results/back/eval/dlib/random.parquet")
    assert len(again) == len(side) and (again["status"] == "ok").all()
    k = again["image_a"].str.split("#").str[1].astype(int) // 2
    key = first.set_index(["image_a", "image_b"])["score"]
    want = key.loc[list(zip(side["image_a"].iloc[k], side["image_b"].iloc[k],
                            strict=True))].to_numpy()
    np.testing.assert_array_equal(again["score"].to_numpy(), want)
    assert again["label"].tolist() == side["label"].iloc[k].tolist()
