"""Mined benchmarks as insightface verification .bin files (issue 34.1-2).

A small dataset is built the way the pipeline leaves it: a faces shard whose
``crop_arcface`` holds 112 px PNG crops (six identities, each a smooth pattern seen with
noise), and benchmarks' ``pairs.parquet`` in the mining layout (folds ``0``..``9`` +
``val``). The export is read back three independent ways: a reader written as insightface's
``load_bin`` (plain pickle + image decode: our own output, read as arcface_torch reads it),
CAST ``cc11.py``'s block slicing, and facecast's own ``kind: insightface_bin, layout:
blocks`` (restricted unpickler). The reference lines are copied from the sources named.
"""

from __future__ import annotations

import json
import pickle

import cv2
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.model_selection import KFold

from facecast.analysis.bin_checks import bin_export_errors
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
from facecast.embed.lbp import LBPEmbedder
from facecast.evaluate.bin_protocol import bin_pairs
from facecast.evaluate.metrics import kfold_accuracy
from facecast.faces.aligned import aligned_row
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png, encode_png
from facecast.faces.decode import DecodedImage
from facecast.io.parquet_io import read_parquet, write_parquet

IDS = [f"id{k}" for k in range(6)]
PER_ID = 4


# ------------------------------------------------ reference code, copied from its source

# insightface recognition/arcface_torch/eval/verification.py (load_bin): the pickle lines
# verbatim; ``mx.image.imdecode(_bin)`` (mxnet, RGB) becomes cv2.imdecode + BGR->RGB, as
# insightface's ONNX evaluation helpers decode .bin images without mxnet.
def reference_load_bin(path, image_size):
    try:
        with open(path, 'rb') as f:
            bins, issame_list = pickle.load(f)  # py2
    except UnicodeDecodeError:
        with open(path, 'rb') as f:
            bins, issame_list = pickle.load(f, encoding='bytes')  # py3
    data = np.zeros((len(issame_list) * 2, image_size[0], image_size[1], 3), np.uint8)
    for idx in range(len(issame_list) * 2):
        _bin = bins[idx]
        img = cv2.imdecode(np.frombuffer(_bin, np.uint8), -1)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        data[idx][:] = img
    return data, issame_list


# insightface recognition/arcface_torch/eval/verification.py, verbatim (pca branch left out)
class LFold:
    def __init__(self, n_splits=2, shuffle=False):
        self.n_splits = n_splits
        if self.n_splits > 1:
            self.k_fold = KFold(n_splits=n_splits, shuffle=shuffle)

    def split(self, indices):
        if self.n_splits > 1:
            return self.k_fold.split(indices)
        else:
            return [(indices, indices)]


def calculate_roc(thresholds, embeddings1, embeddings2, actual_issame, nrof_folds=10):
    assert (embeddings1.shape[0] == embeddings2.shape[0])
    assert (embeddings1.shape[1] == embeddings2.shape[1])
    nrof_pairs = min(len(actual_issame), embeddings1.shape[0])
    nrof_thresholds = len(thresholds)
    k_fold = LFold(n_splits=nrof_folds, shuffle=False)
    accuracy = np.zeros((nrof_folds))  # noqa: UP034 (verbatim)
    indices = np.arange(nrof_pairs)
    diff = np.subtract(embeddings1, embeddings2)
    dist = np.sum(np.square(diff), 1)
    for fold_idx, (train_set, test_set) in enumerate(k_fold.split(indices)):
        # Find the best threshold for the fold
        acc_train = np.zeros((nrof_thresholds))  # noqa: UP034 (verbatim)
        for threshold_idx, threshold in enumerate(thresholds):
            _, _, acc_train[threshold_idx] = calculate_accuracy(
                threshold, dist[train_set], actual_issame[train_set])
        best_threshold_index = np.argmax(acc_train)
        _, _, accuracy[fold_idx] = calculate_accuracy(
            thresholds[best_threshold_index], dist[test_set],
            actual_issame[test_set])
    return accuracy


def calculate_accuracy(threshold, dist, actual_issame):
    predict_issame = np.less(dist, threshold)
    tp = np.sum(np.logical_and(predict_issame, actual_issame))
    fp = np.sum(np.logical_and(predict_issame, np.logical_not(actual_issame)))
    tn = np.sum(
        np.logical_and(np.logical_not(predict_issame),
                       np.logical_not(actual_issame)))
    fn = np.sum(np.logical_and(np.logical_not(predict_issame), actual_issame))

    tpr = 0 if (tp + fn == 0) else float(tp) / float(tp + fn)
    fpr = 0 if (fp + tn == 0) else float(fp) / float(fp + tn)
    acc = float(tp + tn) / dist.size
    return tpr, fpr, acc


# CAST cc11.py (StevenZhou90/CAST), the block slicing verbatim, its print replaced by a list
def cc11_blocks(dataset, issame_list, sub_benchmarks):
    out = []
    sub_benchmark_size = int(dataset.shape[0]/sub_benchmarks)
    for i in range(sub_benchmarks):
        sub_benchmark = dataset[i*sub_benchmark_size: (i+1)*sub_benchmark_size]
        issame = issame_list[int(i*(sub_benchmark_size/2)): int((i+1)*(sub_benchmark_size/2))]
        out.append((sub_benchmark, issame))
    return out


# --------------------------------------------------------------------------- the data


def _crops() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for ident in IDS:
        base = np.asarray(cv2.resize(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8),
                                     (112, 112), interpolation=cv2.INTER_CUBIC), np.float32)
        for k in range(PER_ID):
            noisy = base + rng.normal(0, 120, base.shape)
            out[f"{ident}/{k}.jpg"] = np.clip(noisy, 0, 255).astype(np.uint8)
    return out


def _pairs(rng: np.random.Generator, n_gen: list[int], n_imp: list[int]) -> pd.DataFrame:
    """Pairs in mining layout: fold f holds n_gen[f] genuine then n_imp[f] impostor pairs
    (folds 0..9 then val)."""
    rows = []
    for f, (g, i) in enumerate(zip(n_gen, n_imp, strict=True)):
        fold = str(f) if f < 10 else "val"
        for label, n in ((1, g), (0, i)):
            for _ in range(n):
                a_id = IDS[rng.integers(len(IDS))]
                b_id = a_id if label else IDS[(IDS.index(a_id) + 1 + rng.integers(5)) % 6]
                ka, kb = rng.choice(PER_ID, 2, replace=False)
                rows.append((f"{a_id}/{ka}.jpg", f"{b_id}/{kb}.jpg", a_id, b_id, label, fold,
                             0.0))
    return pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "fold", "ref_score"])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A faces shard and three mined benchmarks on disk."""
    d = tmp_path_factory.mktemp("bins")
    crops = _crops()
    faces = pd.DataFrame({"image_id": list(crops), "status": "ok",
                          "crop_arcface": [encode_png(c) for c in crops.values()]})
    faces.loc[len(faces)] = ["lost/0.jpg", "no_face", None]
    write_parquet(faces, d / "faces.parquet")
    rng = np.random.default_rng(1)
    benches = {"black": _pairs(rng, [3] * 11, [3] * 11),           # band: 10 x (3 + 3)
               "young": _pairs(rng, [2] * 11, [4] * 11),           # band: 10 x (2 + 4)
               "random": _pairs(rng, [5, 4, 4, 3, 4, 4, 3, 4, 4, 4, 2],  # like mode all
                                [6, 7, 6, 6, 7, 6, 6, 7, 6, 6, 3])}
    paths = {}
    for b, p in benches.items():
        paths[b] = d / b / "pairs.parquet"
        paths[b].parent.mkdir()
        write_parquet(p, paths[b])
    return {"dir": d, "crops": crops, "faces": [d / "faces.parquet"], "pairs": benches,
            "paths": paths}


def _export(run, name, benches, **cfg):
    out = run["dir"] / "bins" / f"{name}.bin"
    meta = export_bin({b: run["paths"][b] for b in benches}, run["faces"], out, name=name,
                      cfg={"benchmarks": list(benches), **cfg}, seed=7,
                      provenance={"config_hash": "abc123"})
    return out, meta


def _embed(images: np.ndarray) -> np.ndarray:
    """A model that embeds from the aligned crop (LBP histograms), L2-normalised."""
    f = LBPEmbedder("lbp").embed(torch.from_numpy(np.ascontiguousarray(images)))
    return f / np.linalg.norm(f, axis=1, keepdims=True)


# -------------------------------------------------------------------------- the order


def test_order_is_casts_val_list_when_classes_split_evenly():
    labels = np.r_[np.ones(50), np.zeros(50)].astype(int)   # C11 val.list: 50 + 50 per block
    np.testing.assert_array_equal(bin_pair_order(labels), cast_val_order(labels))
    labels = np.r_[np.ones(500), np.zeros(300)].astype(int)
    np.testing.assert_array_equal(bin_pair_order(labels), cast_val_order(labels))


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
    val = build_blocks({"black": run["pairs"]["black"]}, folds="val")
    assert len(val) == 6 and set(val["benchmark_fold"]) == {"val"}


# ---------------------------------------------------------------- one benchmark, read back


def test_insightface_reader_finds_exactly_the_benchmarks_pairs(run):
    path, meta = _export(run, "black_test", ["black"])
    data, issame = reference_load_bin(str(path), (112, 112))
    with open(path, "rb") as f:   # the layout load_bin needs, py3 spelling
        bins, issame_list = pickle.load(f, encoding="bytes")
    assert isinstance(bins, list) and isinstance(issame_list, list)
    assert all(isinstance(b, bytes) for b in bins)
    assert all(type(s) is bool for s in issame_list)
    bench = run["pairs"]["black"]
    test = bench[bench["fold"] != "val"]
    side = read_parquet(path.with_name("black_test.pairs.parquet"))
    assert side["pair_index"].tolist() == list(range(len(test)))
    assert sorted(zip(side["image_a"], side["image_b"], side["label"], strict=True)) == \
        sorted(zip(test["image_a"], test["image_b"], test["label"], strict=True))
    assert issame == (side["label"] == 1).tolist()
    for k, (a, b) in enumerate(zip(side["image_a"], side["image_b"], strict=True)):
        np.testing.assert_array_equal(data[2 * k], run["crops"][a])   # PNG: the same pixels
        np.testing.assert_array_equal(data[2 * k + 1], run["crops"][b])
    assert meta["blocks"] == [{"name": "black", "source": meta["blocks"][0]["source"],
                               "folds": "test", "n_pairs": 60, "n_genuine": 30,
                               "n_impostor": 30, "first_pair": 0, "first_image": 0,
                               "n_available": 60}]
    on_disk = json.loads(path.with_name("black_test.json").read_text())
    assert on_disk == meta and meta["config_hash"] == "abc123" and meta["facecast_version"]
    assert (meta["image_size"], meta["encoding"]) == (112, "png")
    assert not (path.parent / ".tmp").exists()   # atomic writes leave nothing behind


def test_ten_fold_accuracy_from_the_bin_equals_the_benchmarks(run):
    path, _ = _export(run, "black_acc", ["black"])
    data, issame = reference_load_bin(str(path), (112, 112))
    emb = _embed(data)
    acc = calculate_roc(np.arange(0, 4, 0.01), emb[0::2], emb[1::2], np.asarray(issame))
    bench = run["pairs"]["black"]
    test = bench[bench["fold"] != "val"]
    ea = _embed(np.stack([run["crops"][i] for i in test["image_a"]]))
    eb = _embed(np.stack([run["crops"][i] for i in test["image_b"]]))
    ours = kfold_accuracy((ea * eb).sum(1), test["label"].to_numpy(), test["fold"].to_numpy())
    assert 0.5 < acc.mean() < 1.0        # the pairs are neither trivial nor random
    np.testing.assert_allclose(acc.mean(), ours.mean, atol=1e-12)
    np.testing.assert_allclose(acc.std(), ours.std, atol=1e-12)


def test_facecast_reads_it_back_with_the_same_pairs_and_scores(run):
    path, _ = _export(run, "black_rt", ["black"])
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
    emb = _embed(np.stack(crops))
    readback = (emb[0::2] * emb[1::2]).sum(1)
    side = read_parquet(path.with_name("black_rt.pairs.parquet"))
    ea = _embed(np.stack([run["crops"][i] for i in side["image_a"]]))
    eb = _embed(np.stack([run["crops"][i] for i in side["image_b"]]))
    np.testing.assert_array_equal(readback, (ea * eb).sum(1))    # identical, not close
    assert pairs["label"].tolist() == issame.astype(int).tolist()


# ------------------------------------------------------------------- several benchmarks


def test_unequal_blocks_stop_naming_their_sizes(run):
    with pytest.raises(BinExportError, match=r"black 60 pairs, random 102 pairs.*block_size \(at most 60\)"):
        _export(run, "uneq", ["black", "random"])
    with pytest.raises(BinExportError, match="larger than benchmark 'black'"):
        _export(run, "big", ["black", "random"], block_size=70)
    assert not list((run["dir"] / "bins").glob("uneq*")) + list(
        (run["dir"] / "bins").glob("big*"))


def test_cc11_slicing_gives_each_blocks_pairs(run):
    names = ["black", "young", "random"]
    path, meta = _export(run, "cc3", names, block_size=40)
    data, issame = reference_load_bin(str(path), (112, 112))
    side = read_parquet(path.with_name("cc3.pairs.parquet"))
    blocks = cc11_blocks(data, issame, len(names))
    assert [b["first_pair"] for b in meta["blocks"]] == [0, 40, 80]
    for i, (name, (imgs, same)) in enumerate(zip(names, blocks, strict=True)):
        mine = side[side["block"] == name]
        assert mine["pair_index"].tolist() == list(range(40 * i, 40 * (i + 1)))
        assert same == (mine["label"] == 1).tolist()
        bench = run["pairs"][name]
        test = bench[bench["fold"] != "val"]
        known = set(zip(test["image_a"], test["image_b"], test["label"], strict=True))
        assert set(zip(mine["image_a"], mine["image_b"], mine["label"], strict=True)) <= known
        share = (test["label"] == 1).mean()
        assert abs((mine["label"] == 1).sum() - 40 * share) <= 0.5    # balance kept
        for k, a in enumerate(mine["image_a"]):
            np.testing.assert_array_equal(imgs[2 * k], run["crops"][a])
    again, _ = _export(run, "cc3", names, block_size=40)   # seeded: the same file
    assert again.read_bytes() == path.read_bytes()
    # facecast's layout: blocks gives one protocol per block, with the same pairs
    spec = {"kind": "insightface_bin", "path": str(path), "layout": "blocks"}
    assert implied_protocols(spec) == names
    for i, name in enumerate(names):
        got = bin_pairs(path, layout="blocks", block=i)
        assert got["pair_index"].tolist() == list(range(40 * i, 40 * (i + 1)))
        assert got["fold"].tolist() == side.loc[side["block"] == name, "fold"].tolist()


def test_jpg_encoding_and_missing_crops(run, tmp_path):
    path, meta = _export(run, "jpg", ["black"], encoding="jpg", quality=90)
    data, _ = reference_load_bin(str(path), (112, 112))
    with open(path, "rb") as f:
        bins, _ = pickle.load(f, encoding="bytes")
    assert all(b[:3] == b"\xff\xd8\xff" for b in bins)                # JPEG files
    side = read_parquet(path.with_name("jpg.pairs.parquet"))
    first = run["crops"][side["image_a"].iloc[0]].astype(float)
    # the crops are mostly noise, which JPEG (4:2:0) smooths: correlated, not equal
    assert np.corrcoef(data[0].astype(float).ravel(), first.ravel())[0, 1] > 0.6
    assert 0 < np.abs(data[0] - first).mean()                          # lossy
    assert meta["quality"] == 90 and meta["encoding"] == "jpg"
    lost = run["pairs"]["black"].copy()
    lost.loc[0, "image_a"] = "lost/0.jpg"
    write_parquet(lost, tmp_path / "pairs.parquet")
    with pytest.raises(BinExportError, match=r"lost/0\.jpg \(no_face\)"):
        export_bin({"black": tmp_path / "pairs.parquet"}, run["faces"],
                   tmp_path / "x.bin", name="x", cfg={"benchmarks": ["black"]}, seed=0)
    assert not (tmp_path / "x.bin").exists()


def test_layout_blocks_needs_a_sidecar_that_fits(run, tmp_path):
    path, _ = _export(run, "fits", ["black"])
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
    for name, arr in _crops().items():
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
