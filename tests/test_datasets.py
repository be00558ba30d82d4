"""Dataset adapters and the manifest on tiny generated trees, bad input included."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from facecast.datasets.celeba import read_celeba
from facecast.datasets.folder import read_folder
from facecast.datasets.lfw import read_lfw_pairs, write_lfw_protocol
from facecast.datasets.manifest import (
    DatasetError,
    finalize_manifest,
    read_shard,
    read_shard_ids,
)
from facecast.datasets.stage import build_manifest
from facecast.io.parquet_io import read_parquet, read_provenance


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
    assert m.loc["a/1.jpg//dup1", "status"] == "duplicate"
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


# --- issue 16: hostile rows never crash ingest, never share an id -----------------------

def test_generated_ids_cannot_collide_with_real_files(tmp_path: Path) -> None:
    """A real file named like a duplicate's id keeps its own row (issue 16.1)."""
    root = tmp_path / "root"
    _img(root / "p" / "x.jpg")
    (root / "p" / "x.jpg#dup1").write_bytes((root / "p" / "x.jpg").read_bytes())
    raw = pd.DataFrame({"path": ["p/x.jpg", "p/x.jpg", "p/x.jpg#dup1", "p//x.jpg", "", None],
                        "identity": ["p"] * 6})
    m = finalize_manifest(raw, root, shard_size=10)
    assert m["image_id"].is_unique
    by_id = m.set_index("image_id")
    assert by_id.loc["p/x.jpg#dup1", "status"] == "ok"  # the real file is not shadowed
    assert by_id.loc["p/x.jpg", "status"] == "ok"
    assert list(m["status"]) == ["ok", "duplicate", "ok", "duplicate", "no_path", "no_path"]
    assert all("//" in i for i in m["image_id"][[1, 3, 4, 5]])
    assert not any("//" in p for p in m["path"])  # paths stay plain


def test_bad_cells_become_row_statuses_with_the_csv_line(tmp_path: Path) -> None:
    """Empty path and a too-long name are row statuses naming the line (issue 16.2)."""
    root = tmp_path / "data"
    _img(root / "p1" / "a.png")
    long_name = "n" * 300 + ".jpg"
    csv = tmp_path / "m.csv"
    # line 3 holds a quoted newline, so the rows after it start one line later
    csv.write_text("path,identity\np1/a.png,p1\n\"p1/b\nc.png\",p1\n,p1\n"
                   f"p1/{long_name},p1\n", encoding="utf-8")
    m = build_manifest({"kind": "table", "root": str(root), "manifest": str(csv),
                        "shard_size": 10}, tmp_path, tmp_path / "m.parquet")
    assert len(m) == 4 and m["image_id"].is_unique
    assert list(m["status"]) == ["ok", "missing", "no_path", "unreadable"]
    assert m["message"][1].startswith(f"{csv}:3: file not found")
    assert m["message"][2] == f"{csv}:5: empty path"
    assert m["message"][3].startswith(f"{csv}:6: cannot access") and "too long" in m["message"][3]


def test_csv_with_bom_and_hostile_paths(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _img(root / "p1" / "a.png")
    csv = tmp_path / "m.csv"
    csv.write_bytes("\ufeffpath,identity\n/etc/passwd,p1\n../,p1\np1/a.png,p1\n"
                    "p1/../p1/a.png,p1\n/etc/passwd,p1\n".encode())
    m = build_manifest({"kind": "table", "root": str(root), "manifest": str(csv),
                        "shard_size": 10}, tmp_path, tmp_path / "m.parquet")
    assert list(m["status"]) == ["outside_root", "outside_root", "ok", "duplicate",
                                 "outside_root"]
    assert m["image_id"].is_unique and m["message"][0].startswith(f"{csv}:2: path escapes")


def test_path_through_a_folder_symlink_out_of_the_root_is_outside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _img(tmp_path / "elsewhere" / "secret.jpg")
    root.mkdir()
    (root / "door").symlink_to(tmp_path / "elsewhere")
    m = finalize_manifest(pd.DataFrame({"path": ["door/secret.jpg"], "identity": ["x"]}), root,
                          shard_size=5)
    assert m["status"].iloc[0] == "outside_root"


@pytest.mark.parametrize("text,expected", [
    ("true\nFalse\nno\nYES\n0\n1\n\nFALSE\n",
     [True, False, False, True, False, True, False, False]),
])
def test_exclude_is_parsed_strictly(tmp_path: Path, text: str, expected: list[bool]) -> None:
    """'no', 'False' and '0' are false, not True as astype(bool) made them (issue 16.3)."""
    root = tmp_path / "data"
    values = text.split("\n")[:-1]
    lines = ["path,identity,exclude"]
    for i, v in enumerate(values):
        _img(root / "p" / f"{i}.png")
        lines.append(f"p/{i}.png,p,{v}")
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join(lines) + "\n")
    m = build_manifest({"kind": "table", "root": str(root), "manifest": str(csv),
                        "shard_size": 10}, tmp_path, tmp_path / "m.parquet")
    assert list(m["exclude"]) == expected
    # Parquet: real booleans and 0/1 integers
    for col in ([True, False], [1, 0]):
        pq_path = tmp_path / f"m{col[0]!r}.parquet"
        pd.DataFrame({"path": ["p/0.png", "p/1.png"], "identity": ["p", "p"],
                      "exclude": col}).to_parquet(pq_path)
        m = build_manifest({"kind": "table", "root": str(root), "manifest": str(pq_path),
                            "shard_size": 10}, tmp_path, tmp_path / "out.parquet")
        assert list(m["exclude"]) == [True, False]


@pytest.mark.parametrize("bad", ["maybe", "2", "nein"])
def test_bad_exclude_value_is_an_error_naming_the_line(tmp_path: Path, bad: str) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text(f"path,identity,exclude\na.png,p,no\nb.png,p,{bad}\n")
    with pytest.raises(DatasetError, match=rf"m.csv:3: exclude value '{bad}' is not a boolean"):
        build_manifest({"kind": "table", "root": str(tmp_path), "manifest": str(csv)},
                       tmp_path, tmp_path / "m.parquet")


def test_folder_walk_lists_every_image_like_entry(tmp_path: Path) -> None:
    """Symlinked identity folders, hidden files, FIFOs and netpbm files get rows (16.6)."""
    root = tmp_path / "root"
    _img(root / "alice" / "1.jpg")
    _img(root / "alice" / ".hidden.jpg")
    _img(root / "carol" / "1.pgm")
    _img(tmp_path / "outside" / "o.jpg")
    (root / "bob").symlink_to(root / "alice")            # inside: followed, identity bob
    (root / "eve").symlink_to(tmp_path / "outside")      # outside: one outside_root row
    (root / "alice" / "loop").symlink_to(root / "alice")  # loop: not followed
    (root / "alice" / "up").symlink_to(root)              # loop through the root
    os.mkfifo(root / "alice" / "pipe.jpg")
    (root / "alice" / "broken.jpg").symlink_to(root / "nowhere.jpg")
    (root / "alice" / "notes.txt").write_text("not an image")
    m = build_manifest({"kind": "folder", "root": str(root), "shard_size": 50}, tmp_path,
                       tmp_path / "m.parquet").set_index("path")
    st = m["status"].to_dict()
    assert st["alice/1.jpg"] == st["alice/.hidden.jpg"] == "ok"
    assert st["bob/1.jpg"] == "ok" and m.loc["bob/1.jpg", "identity"] == "bob"
    assert st["carol/1.pgm"] == "ok"
    assert st["eve"] == "outside_root" and "outside the dataset root" in m.loc["eve", "message"]
    assert st["alice/pipe.jpg"] == "unreadable"
    assert "not a regular file (FIFO)" in m.loc["alice/pipe.jpg", "message"]
    assert st["alice/broken.jpg"] == "missing" and "broken symlink" in m.loc["alice/broken.jpg",
                                                                              "message"]
    assert not any("loop" in p or p.startswith("alice/up") for p in st)
    assert "alice/notes.txt" not in st
    assert m["image_id"].is_unique
