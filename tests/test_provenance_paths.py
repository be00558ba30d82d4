"""Issue 24.4: provenance paths are relative where they can be, so results move with the folder.

A run folder (``results/`` plus its data) is built in a temporary folder, moved whole,
and the faces stage still reads the container datasets from the moved manifest.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

from facecast.datasets.insightface_bin import write_bin
from facecast.datasets.lfw import write_lfw_protocol
from facecast.datasets.recordio import pack, write_recordio
from facecast.datasets.sources import fetch_bytes, resolve_containers
from facecast.datasets.stage import build_manifest, dataset_root
from facecast.embed.base import Embedder
from facecast.faces.crops import decode_png
from facecast.faces.stage import run_faces_shard
from facecast.io.parquet_io import read_provenance, write_parquet
from facecast.io.paths import is_inside, portable_path, resolve_portable


def _jpeg(seed: int) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(seed)
    arr = np.kron(rng.integers(0, 255, (14, 14, 3), dtype=np.uint8), np.ones((8, 8, 1), np.uint8))
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=95)
    data = buf.getvalue()
    return data, np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.fixture(autouse=True)
def _no_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_detector(*a, **k):
        raise AssertionError("detector none must not load MTCNN")

    monkeypatch.setattr("facecast.faces.stage.FaceDetector", no_detector)


def test_portable_path_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    monkeypatch.chdir(run)
    root = run / "data"
    assert portable_path(root / "a" / "b.rec", root) == "a/b.rec"
    assert portable_path("data/x.rec", root) == "x.rec"  # relative input: to the cwd
    assert portable_path(run / "models" / "w.onnx") == "models/w.onnx"  # base: the cwd
    assert portable_path(run / "models" / "w.onnx", root) == str(run / "models" / "w.onnx")
    assert portable_path(run / "models" / "w.onnx", root, within=run) == "../models/w.onnx"
    outside = tmp_path / "elsewhere" / "w.onnx"
    assert portable_path(outside, root, within=run) == str(outside)  # absolute otherwise
    assert portable_path(run / "data" / ".." / "data" / "y") == "data/y"  # normalised
    # relative to the run folder as configured: kept, even outside it (the same string in
    # every run folder); for another base it is resolved first
    assert portable_path("../weights/w.onnx") == "../weights/w.onnx"
    assert portable_path("./models//w.onnx") == "models/w.onnx"
    assert portable_path("../weights/w.onnx", root) == str(tmp_path / "weights" / "w.onnx")
    for value, base in (("a/b.rec", root), ("../models/w.onnx", root), (str(outside), root),
                        ("models/w.onnx", None)):
        full = resolve_portable(value, base)
        assert full.is_absolute() and portable_path(full, base, within=run) == value
    assert is_inside(root, root) and not is_inside(tmp_path / "data2", tmp_path / "data")


def _recordio_set(folder: Path) -> dict[int, np.ndarray]:
    folder.mkdir(parents=True)
    records, arrays = [], {}
    for rid in range(1, 6):
        data, arr = _jpeg(rid)
        records.append((rid, pack(float(rid % 2), data)))
        arrays[rid] = arr
    write_recordio(folder / "train.rec", folder / "train.idx", records)
    return arrays


def _read_all_faces(manifest: Path, root: Path | str, out_dir: Path) -> list[dict]:
    shards = sorted(pq.read_table(manifest, columns=["shard"]).column("shard").unique()
                    .to_pylist())
    rows = []
    for shard in shards:
        out = out_dir / f"faces_{shard}.parquet"
        run_faces_shard(manifest, shard, root, out, {"detector": "none"})
        rows += pq.read_table(out).to_pylist()
    return rows


@pytest.mark.parametrize("configured", ["relative", "absolute"])
def test_moved_recordio_run_folder_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               configured: str) -> None:
    run = tmp_path / "run"
    arrays = _recordio_set(run / "data")
    monkeypatch.chdir(run)

    def spec_in(folder: Path) -> dict:
        rec = Path("data/train.rec") if configured == "relative" else folder / "data/train.rec"
        return {"kind": "recordio", "rec": str(rec), "idx": str(rec.with_suffix(".idx")),
                "shard_size": 3}

    manifest = run / "results" / "rec" / "manifest.parquet"
    build_manifest(spec_in(run), "results/rec/dataset", manifest)
    prov = read_provenance(manifest)
    assert prov["containers"] == {"train.rec": {"kind": "recordio", "path": "train.rec",
                                                "idx": "train.idx"}}
    assert prov["dataset_root"] == "data"
    assert str(tmp_path) not in str(prov)  # nothing absolute left in the provenance

    moved = tmp_path / "moved" / "run2"
    moved.parent.mkdir()
    shutil.move(run, moved)
    monkeypatch.chdir(moved)
    root = dataset_root(spec_in(moved), "results/rec/dataset")  # the config, as after a move
    rows = _read_all_faces(Path("results/rec/manifest.parquet"), root, moved)
    assert [r["status"] for r in rows] == ["aligned_input"] * 5
    assert read_provenance(moved / "faces_00000.parquet")["dataset_root"] == "data"
    for r in rows:
        rid = int(r["image_id"].split("#")[1])
        assert np.array_equal(decode_png(r["crop_arcface"]), arrays[rid])


def test_moved_insightface_bin_run_folder_still_reads(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    (run / "sets").mkdir(parents=True)
    images = [_jpeg(k) for k in range(6)]
    write_bin(run / "sets" / "lfw.bin", [b for b, _ in images], [True, False, True])
    monkeypatch.chdir(run)
    spec = {"kind": "insightface_bin", "path": "sets/lfw.bin"}
    build_manifest(spec, "results/b/dataset", "results/b/manifest.parquet")
    prov = read_provenance("results/b/manifest.parquet")
    assert prov["containers"]["lfw.bin"]["path"] == "lfw.bin"
    moved = tmp_path / "elsewhere"
    shutil.move(run, moved)
    monkeypatch.chdir(moved)
    rows = _read_all_faces(Path("results/b/manifest.parquet"),
                           dataset_root(spec, "results/b/dataset"), moved)
    assert [r["status"] for r in rows] == ["aligned_input"] * 6
    for k, r in enumerate(rows):
        assert np.array_equal(decode_png(r["crop_arcface"])[:8, :8], images[k][1][:8, :8])


def test_container_outside_the_root_but_inside_the_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured ``root`` that does not hold the .rec: stored as ``../``, still moves."""
    run = tmp_path / "run"
    _recordio_set(run / "data")
    (run / "other").mkdir()
    monkeypatch.chdir(run)
    spec = {"kind": "recordio", "rec": str(run / "data" / "train.rec"), "root": "other"}
    build_manifest(spec, "results/r/dataset", "results/r/manifest.parquet")
    stored = read_provenance("results/r/manifest.parquet")["containers"]["train.rec"]
    assert (stored["path"], stored["idx"]) == ("../data/train.rec", "../data/train.idx")
    shutil.move(run, tmp_path / "run2")
    monkeypatch.chdir(tmp_path / "run2")
    rows = _read_all_faces(Path("results/r/manifest.parquet"), "other", tmp_path / "run2")
    assert [r["status"] for r in rows] == ["aligned_input"] * 5


def test_fetch_bytes_resolves_against_the_root(tmp_path: Path) -> None:
    arrays = _recordio_set(tmp_path / "data")
    relative = {"train.rec": {"kind": "recordio", "path": "train.rec", "idx": "train.idx"}}
    data, status, _ = fetch_bytes("train.rec#2", relative, root=tmp_path / "data")
    assert status == "ok"
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), arrays[2])
    data, status, message = fetch_bytes("train.rec#2", relative)  # no root: no guessing
    assert (data, status) == (None, "unreadable") and "dataset root" in message
    resolved = resolve_containers(relative, tmp_path / "data")
    assert resolved["train.rec"]["path"] == str(tmp_path / "data" / "train.rec")
    assert fetch_bytes("train.rec#2", resolved)[1] == "ok"
    # older manifests stored absolute paths: they are kept as they are
    assert resolve_containers(resolved, tmp_path / "nowhere") == resolved


class _FixedEmbedder(Embedder):
    backend = "fixed"

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        return np.zeros((len(crops), 1), np.float32)


def test_weights_and_sources_are_relative_inside_the_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import facenet_pytorch

    from facecast.faces.detect import MTCNN_FILES, load_mtcnn_nets

    run = tmp_path / "run"
    (run / "models").mkdir(parents=True)
    monkeypatch.chdir(run)
    # embedder weights: relative inside the run folder, absolute outside; checksum kept
    (run / "models" / "w.bin").write_bytes(b"weights")
    emb = _FixedEmbedder("m")
    emb.weights_path = str(run / "models" / "w.bin")
    prov = emb.provenance()
    assert prov["weights"] == "models/w.bin"
    assert prov["weights_sha256"] == hashlib.sha256(b"weights").hexdigest()
    (tmp_path / "w2.bin").write_bytes(b"w2")
    emb.weights_path = str(tmp_path / "w2.bin")
    assert emb.provenance()["weights"] == str(tmp_path / "w2.bin")
    # MTCNN weights copied into the run folder
    src = Path(facenet_pytorch.__file__).parent / "data"
    for fname in MTCNN_FILES.values():
        shutil.copy(src / fname, run / "models" / fname)
    _, info = load_mtcnn_nets(run / "models")
    assert {k: v["path"] for k, v in info.items()} == {
        k: f"models/{f}" for k, f in MTCNN_FILES.items()}
    assert all(len(v["sha256"]) == 64 for v in info.values())
    # a protocol's source list, configured by its absolute path
    pairs = run / "lists" / "pairs.txt"
    pairs.parent.mkdir()
    pairs.write_text("1 1\nann 1 2\nann 1 bob 1\n")
    manifest = run / "results" / "m.parquet"
    write_parquet(pd.DataFrame({"image_id": ["ann/ann_0001.jpg", "ann/ann_0002.jpg",
                                             "bob/bob_0001.jpg"], "status": ["ok"] * 3}),
                  manifest)
    write_lfw_protocol(str(pairs), manifest, run / "results" / "p.parquet")
    assert read_provenance(run / "results" / "p.parquet")["source"] == "lists/pairs.txt"
    assert os.path.isfile(resolve_portable("lists/pairs.txt"))
