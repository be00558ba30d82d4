"""Dataset adapters and the manifest on tiny generated trees, bad input included."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from facecast.datasets import build_manifest
from facecast.datasets.celeba import read_celeba
from facecast.datasets.folder import read_folder
from facecast.datasets.lfw import read_lfw_pairs, write_lfw_protocol
from facecast.manifest import (
    DatasetError,
    finalize_manifest,
    read_shard,
    read_shard_ids,
)
from facecast.parquet_io import read_parquet, read_provenance


def _img(path: Path, value: int = 100) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path)


@pytest.fixture
def folder_tree(tmp_path: Path) -> Path:
    root = tmp_path / "lfw"
    for name, n in [("Alice_A", 3), ("Bob_B", 2), ("Carol_C", 1)]:
        for i in range(1, n + 1):
            _img(root / name / f"{name}_{i:04d}.jpg", 10 * i)
    (root / "Alice_A" / "notes.txt").write_text("not an image")
    _img(root / "stray.jpg")
    return root


def test_folder_adapter_lists_images_with_identities(folder_tree: Path) -> None:
    raw = read_folder(folder_tree)
    assert list(raw["path"]) == sorted(raw["path"])
    assert "Alice_A/notes.txt" not in set(raw["path"])
    assert raw.set_index("path").loc["stray.jpg", "status"] == "no_identity"
    assert (raw[raw["path"] != "stray.jpg"]["status"] == "ok").all()


def test_folder_manifest_shards_flags_and_provenance(folder_tree: Path, tmp_path: Path) -> None:
    spec = {"kind": "folder", "root": str(folder_tree), "shard_size": 2}
    out = tmp_path / "results" / "manifest.parquet"
    m = build_manifest(spec, tmp_path / "unused", out, provenance={"seed": 7})
    back = read_parquet(out)
    assert len(back) == 7 == len(m)
    assert read_shard_ids(out) == ["00000", "00001", "00002", "00003"]
    assert list(read_shard(out, "00001")["image_id"]) == list(m["image_id"][2:4])
    carol = back[back["identity"] == "Carol_C"]
    assert carol["single_image"].all() and not back[back["identity"] == "Alice_A"]["single_image"].any()
    assert back["image_id"].is_unique
    prov = read_provenance(out)
    assert prov["seed"] == 7 and prov["stage"] == "manifest" and "facecast_version" in prov
    # one Parquet row group per shard
    import pyarrow.parquet as pq
    assert pq.ParquetFile(out).metadata.num_row_groups == 4


def test_bad_rows_keep_a_status(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _img(root / "a" / "1.jpg")
    _img(root / "a" / "2.jpg")
    secret = tmp_path / "secret.jpg"
    _img(secret)
    noread = root / "b" / "locked.jpg"
    _img(noread)
    os.chmod(noread, 0)
    raw = pd.DataFrame({
        "path": ["a/1.jpg", "a/1.jpg", "a/missing.jpg", "../secret.jpg", str(secret),
                 "a/2.jpg", "b/locked.jpg"],
        "identity": ["a", "a", "a", "a", "a", None, "b"],
    })
    m = finalize_manifest(raw, root, shard_size=10).set_index("image_id")
    assert len(m) == 7
    assert m.loc["a/1.jpg", "status"] == "ok"
    assert m.loc["a/1.jpg#dup1", "status"] == "duplicate"
    assert m.loc["a/missing.jpg", "status"] == "missing"
    outside = m[m["status"] == "outside_root"]
    assert len(outside) == 2 and all("escapes" in msg for msg in outside["message"])
    assert m.loc["a/2.jpg", "status"] == "no_identity"
    expected_locked = "ok" if os.geteuid() == 0 else "unreadable"  # root reads anything
    assert m.loc["b/locked.jpg", "status"] == expected_locked
    os.chmod(noread, 0o644)


def test_symlink_escaping_root_is_flagged(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _img(tmp_path / "outside.jpg")
    (root / "x").mkdir(parents=True)
    (root / "x" / "link.jpg").symlink_to(tmp_path / "outside.jpg")
    m = finalize_manifest(pd.DataFrame({"path": ["x/link.jpg"], "identity": ["x"]}), root,
                          shard_size=5)
    assert m["status"].iloc[0] == "outside_root"


def test_table_manifest_labels_and_exclude(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for p in ["p1/a.png", "p1/b.png", "p2/c.png"]:
        _img(root / p)
    csv = tmp_path / "m.csv"
    csv.write_text("path,identity,split,smile,age\np1/a.png,p1,train,1,30\n"
                   "p1/b.png,p1,test,0,31\np2/c.png,p2,test,1,50\n")
    excl = tmp_path / "exclude.txt"
    excl.write_text("# training images\np1/a.png\n")
    spec = {"kind": "table", "root": str(root), "manifest": str(csv), "shard_size": 10,
            "exclude": str(excl)}
    m = build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    assert {"label_smile", "label_age"} <= set(m.columns)
    assert list(m["exclude"]) == [True, False, False]
    assert list(m["split"]) == ["train", "test", "test"]


def test_table_manifest_missing_columns_is_clear_error(tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text("file,person\na.jpg,x\n")
    spec = {"kind": "table", "root": str(tmp_path), "manifest": str(csv)}
    with pytest.raises(DatasetError, match=r"lacks required column\(s\) \['path', 'identity'\]"):
        build_manifest(spec, tmp_path, tmp_path / "m.parquet")


def _celeba_tree(tmp_path: Path, attr_lines: list[str] | None = None) -> Path:
    root = tmp_path / "celeba"
    for i in range(1, 4):
        _img(root / "img_align_celeba" / f"{i:06d}.jpg")
    (root / "identity_CelebA.txt").write_text("000001.jpg 7\n000002.jpg 7\n000003.jpg 9\n")
    (root / "list_eval_partition.txt").write_text("000001.jpg 0\n000002.jpg 1\n000003.jpg 2\n")
    lines = attr_lines or ["3", "Smiling Young", "000001.jpg  1 -1", "000002.jpg -1 -1",
                           "000003.jpg  1  1"]
    (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    return root


def test_celeba_layout(tmp_path: Path) -> None:
    raw = read_celeba(_celeba_tree(tmp_path))
    assert list(raw["path"]) == [f"img_align_celeba/{i:06d}.jpg" for i in (1, 2, 3)]
    assert list(raw["identity"]) == ["7", "7", "9"]
    assert list(raw["split"]) == ["train", "val", "test"]
    assert list(raw["label_Smiling"]) == [1, 0, 1] and list(raw["label_Young"]) == [0, 0, 1]


@pytest.mark.parametrize("lines,match", [
    (["3", "Smiling Young", "000001.jpg 1", "000002.jpg -1 -1", "000003.jpg 1 1"],
     r"list_attr_celeba.txt:3: expected an image name and 2 labels"),
    (["3", "Smiling Young", "000001.jpg 1 -1", "000002.jpg -1 2", "000003.jpg 1 1"],
     r"list_attr_celeba.txt:4: labels must be -1 or 1"),
    (["5", "Smiling Young", "000001.jpg 1 -1", "000002.jpg -1 -1", "000003.jpg 1 1"],
     r"declares 5 images but lists 3"),
])
def test_celeba_malformed_lines_name_file_and_line(tmp_path: Path, lines, match) -> None:
    with pytest.raises(DatasetError, match=match):
        read_celeba(_celeba_tree(tmp_path, lines))


def test_celeba_malformed_identity_line(tmp_path: Path) -> None:
    root = _celeba_tree(tmp_path)
    (root / "identity_CelebA.txt").write_text("000001.jpg 7\n000002.jpg\n")
    with pytest.raises(DatasetError, match=r"identity_CelebA.txt:2"):
        read_celeba(root)


def _pairs_file(tmp_path: Path, body: list[str], head: str = "2\t1") -> Path:
    p = tmp_path / "pairs.txt"
    p.write_text("\n".join([head, *body]) + "\n")
    return p


def test_lfw_pairs_parse_and_protocol(folder_tree: Path, tmp_path: Path) -> None:
    pairs = _pairs_file(tmp_path, ["Alice_A\t1\t2", "Alice_A\t1\tBob_B\t2",
                                   "Bob_B\t1\t2", "Carol_C\t1\tZed_Z\t1"])
    df = read_lfw_pairs(pairs)
    assert list(df["fold"]) == ["0", "0", "1", "1"] and list(df["label"]) == [1, 0, 1, 0]
    assert df["image_a"].iloc[0] == "Alice_A/Alice_A_0001.jpg"
    spec = {"kind": "lfw", "root": str(folder_tree), "pairs": str(pairs), "shard_size": 100}
    man = tmp_path / "out" / "manifest.parquet"
    build_manifest(spec, tmp_path, man)
    proto = write_lfw_protocol(pairs, man, tmp_path / "out" / "pairs.parquet")
    assert list(proto["status"]) == ["ok", "ok", "ok", "not_in_manifest"]


@pytest.mark.parametrize("body,head,match", [
    (["Alice_A\t1", "Alice_A\t1\tBob_B\t2"], "1\t1", r"pairs.txt:2: matched pair needs"),
    (["Alice_A\t1\t2", "Alice_A\tx\tBob_B\t2"], "1\t1", r"pairs.txt:3: expected an image number"),
    (["Alice_A\t1\t2"], "1\t1", r"promises 1 folds x 2 x 1 = 2 pairs, file has 1"),
    (["Alice_A\t1\t2", "Bob_B\t1\t2"], "1\t1", r"pairs.txt:3: mismatched pair needs"),
])
def test_lfw_pairs_malformed(tmp_path: Path, body, head, match) -> None:
    with pytest.raises(DatasetError, match=match):
        read_lfw_pairs(_pairs_file(tmp_path, body, head))


def test_missing_root_is_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        build_manifest({"kind": "folder", "root": str(tmp_path / "nope")}, tmp_path,
                       tmp_path / "m.parquet")
