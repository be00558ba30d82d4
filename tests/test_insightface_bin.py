"""insightface verification .bin sets: restricted unpickling, dataset, 10-fold protocol."""

from __future__ import annotations

import io
import os
import pickle
import pickletools

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from reference.bin_inputs import lfw_like
from reference.common import read_record
from sklearn.model_selection import KFold

from facecast.datasets.insightface_bin import (
    UnsafePickleError,
    load_bin,
    read_insightface_bin,
    restricted_loads,
    write_bin,
)
from facecast.datasets.manifest import DatasetError
from facecast.datasets.stage import build_manifest
from facecast.evaluate.bin_protocol import bin_pairs
from facecast.evaluate.protocols import import_protocol, load_protocol
from facecast.evaluate.stage import evaluate_benchmark
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet


def _jpeg(seed: int) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 255, (112, 112, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=80)
    return buf.getvalue()


# ------------------------------------------------------------ the restricted unpickler

@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_real_layouts_load(tmp_path, protocol):
    """Lists of bytes (protocol 2 pickles them through _codecs.encode), numpy bool issame
    arrays and uint8 image arrays, as insightface's .bin files of different vintages."""
    images = [_jpeg(i) for i in range(6)]
    issame = [True, False, True]
    p = tmp_path / "a.bin"
    write_bin(p, images, issame, protocol=protocol)
    got, same = load_bin(p)
    assert got == images and same.tolist() == issame
    variant = ([np.frombuffer(b, np.uint8) for b in images], np.array(issame))
    p.write_bytes(pickle.dumps(variant, protocol=protocol))
    got, same = load_bin(p)
    assert got == images and same.tolist() == issame
    p.write_bytes(pickle.dumps((images, [np.bool_(x) for x in issame]), protocol=protocol))
    assert load_bin(p)[1].tolist() == issame


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned_by_pickle",))


def test_a_pickle_carrying_a_callable_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = pickle.dumps(([_jpeg(0), _Evil()], [True]), protocol=2)
    assert "system" in str(list(pickletools.genops(data)))
    with pytest.raises(UnsafePickleError, match="refused to load (posix|os|nt).system"):
        restricted_loads(data)
    (tmp_path / "evil.bin").write_bytes(data)
    with pytest.raises(UnsafePickleError, match="evil.bin"):
        load_bin(tmp_path / "evil.bin")
    assert not (tmp_path / "pwned_by_pickle").exists()
    for obj in (np.array([1.5, 2.5]), np.array(["a"], dtype=object), {"a": 1}.items()):
        with pytest.raises((UnsafePickleError, TypeError)):
            restricted_loads(pickle.dumps(obj, protocol=2))
    with pytest.raises(UnsafePickleError, match="builtins.eval"):
        restricted_loads(b"cbuiltins\neval\n(S'1+1'\ntR.")


def test_layout_errors_name_the_file(tmp_path):
    p = tmp_path / "x.bin"
    write_bin(p, [_jpeg(0)] * 3, [True])
    with pytest.raises(DatasetError, match="x.bin: 3 images for 1 pairs"):
        load_bin(p)
    p.write_bytes(pickle.dumps(([1, 2], [True])))
    with pytest.raises(DatasetError, match="image 0 is int"):
        load_bin(p)
    p.write_bytes(b"not a pickle")
    with pytest.raises(DatasetError, match="not a readable insightface .bin"):
        load_bin(p)


@pytest.mark.parametrize("obj, message", [
    (([b"a", b"b"], ["yes"]), r"issame label 0 is 'yes' \(str\), not a bool"),
    (([b"a", b"b"], [2]), r"issame label 0 is 2 \(int\), not a bool"),
    (([b"a", b"b"], {"0": True}), "the issame labels are a dict, not a list of bools"),
    (([b"a", b"b"], b"\x01"), "the issame labels are a bytes, not a list of bools"),
    (({"0": b"a"}, [True]), "the images are a dict, not a list"),
    ((["a", "b"], [True]), "image 0 is str, not encoded bytes"),
    (([b"a", b"b"], [True], [False]), r"bools\) pair; got a tuple of 3"),
    ({"images": [b"a"]}, r"bools\) pair; got a dict"),
    ([b"a", b"b"], "the images are a bytes, not a list"),
])
def test_a_pickle_of_another_shape_is_a_clear_error(tmp_path, obj, message):
    """Anything but (list of encoded images, list of bools) is refused, naming the file."""
    p = tmp_path / "odd.bin"
    p.write_bytes(pickle.dumps(obj, protocol=2))
    with pytest.raises(DatasetError, match=rf"odd.bin: .*{message}"):
        load_bin(p)


def test_integer_and_numpy_labels_are_bools(tmp_path):
    p = tmp_path / "ints.bin"
    p.write_bytes(pickle.dumps(([b"a", b"b", b"c", b"d"], [1, 0]), protocol=2))
    assert load_bin(p)[1].tolist() == [True, False]
    p.write_bytes(pickle.dumps(([b"a", b"b"], np.array([1], np.int8)), protocol=2))
    assert load_bin(p)[1].tolist() == [True]


# ------------------------------------------------------------ dataset and protocol

@pytest.fixture(scope="module")
def bin_set(tmp_path_factory):
    d = tmp_path_factory.mktemp("bin")
    issame, _ = lfw_like()  # 205 pairs: KFold's first 5 folds get one pair more
    n_pairs = len(issame)
    images = [_jpeg(i) for i in range(2 * n_pairs)]
    write_bin(d / "lfw.bin", images, issame.tolist(), protocol=2)
    return d, issame


def test_dataset_rows_and_folds(bin_set):
    d, issame = bin_set
    raw = read_insightface_bin(d / "lfw.bin")
    assert raw["path"].tolist()[:3] == ["lfw.bin#0", "lfw.bin#1", "lfw.bin#2"]
    assert (raw["status"] == "ok").all()
    k = int(np.flatnonzero(issame)[0])
    assert raw.loc[2 * k, "identity"] == raw.loc[2 * k + 1, "identity"]
    k = int(np.flatnonzero(~issame)[0])
    assert raw.loc[2 * k, "identity"] != raw.loc[2 * k + 1, "identity"]
    pairs = bin_pairs(d / "lfw.bin")
    expect = np.zeros(len(issame), int)
    for f, (_, test) in enumerate(KFold(n_splits=10, shuffle=False).split(issame)):
        expect[test] = f
    assert pairs["fold"].astype(int).tolist() == expect.tolist()
    assert pairs["label"].astype(bool).tolist() == issame.tolist()


def test_evaluates_to_insightface_accuracy(bin_set, tmp_path):
    d, issame = bin_set
    spec = {"kind": "insightface_bin", "path": str(d / "lfw.bin")}
    manifest = build_manifest(spec, tmp_path / "dataset", tmp_path / "manifest.parquet")
    assert read_provenance(tmp_path / "manifest.parquet")["containers"]["lfw.bin"]["kind"] \
        == "insightface_bin"
    proto = tmp_path / "protocols" / "lfwbin.parquet"
    import_protocol({"format": "insightface_bin", "path": str(d / "lfw.bin")},
                    tmp_path / "manifest.parquet", proto)
    pairs = load_protocol(proto)
    assert len(pairs) == len(issame) and pairs["fold"].nunique() == 10
    assert "consecutive blocks" in read_provenance(proto)["folds"]
    # embeddings: genuine pairs closer on average, with overlap (accuracy well below 1)
    same, emb = lfw_like()
    assert same.tolist() == issame.tolist()
    n_img, dim = emb.shape
    ok = manifest["status"].to_numpy() == "ok"
    table = pa.table({
        "image_id": manifest["image_id"].tolist(),
        "status": manifest["status"].tolist(), "message": manifest["message"].tolist(),
        "embedding": pa.FixedSizeListArray.from_arrays(
            pa.array(emb.astype(np.float32).reshape(-1)), dim, mask=pa.array(~ok)),
        "norm": pa.array(np.ones(n_img, np.float32)),
    })
    write_parquet(table, tmp_path / "emb.parquet")
    row = evaluate_benchmark(proto, [tmp_path / "emb.parquet"], tmp_path / "scores.parquet",
                             tmp_path / "out", model="m", benchmark="lfwbin",
                             cfg={"plots": False})
    scores = read_parquet(tmp_path / "scores.parquet")
    assert (scores["status"] == "ok").all() and row["n_skipped"] == 0
    # insightface's evaluate on the same embeddings (recorded from its verification.py)
    ref = read_record("insightface", "evaluate_cases")["outputs"]["lfw_like"]
    ref_mean, ref_std = ref["mean"], ref["std"]
    assert row["accuracy"] == pytest.approx(ref_mean, abs=1e-12)
    assert row["accuracy_std"] == pytest.approx(ref_std, abs=1e-12)
    assert row["n_folds"] == 10
    assert 0.6 < ref_mean < 0.97  # a real discrimination, not a trivial one


def test_an_empty_entry_is_a_status_row(tmp_path):
    write_bin(tmp_path / "e.bin", [_jpeg(0), b"", _jpeg(1), _jpeg(2)], [True, False],
              protocol=2)
    raw = read_insightface_bin(tmp_path / "e.bin")
    assert raw["status"].tolist() == ["ok", "decode_error", "ok", "ok"]
    assert "image 1 of e.bin is empty" in raw.loc[1, "message"]


def test_import_on_another_dataset_fails_clearly(bin_set, tmp_path):
    d, _ = bin_set
    spec = {"kind": "insightface_bin", "path": str(d / "lfw.bin")}
    build_manifest(spec, tmp_path / "dataset", tmp_path / "manifest.parquet")
    other = tmp_path / "cfp_fp.bin"
    write_bin(other, [_jpeg(0), _jpeg(1)], [False])
    with pytest.raises(DatasetError, match="no pair resolves"):
        import_protocol({"format": "insightface_bin", "path": str(other)},
                        tmp_path / "manifest.parquet", tmp_path / "p.parquet")
