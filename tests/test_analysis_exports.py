"""Exports of mined pairs read back: escaped paths/names, CAST's val.list layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.analysis.exports import (
    ExportError,
    cast_val_order,
    image_numbers,
    write_cast_lists,
    write_lfw_pairs,
)
from facecast.datasets.lfw import read_lfw_pairs
from facecast.evaluate.protocols import read_cast_lists

BAD_NAMES = ["plain/a.jpg", "with space/b c.jpg", "tab\there/d.jpg", "new\nline/e.jpg",
             "cr\rhere/f.jpg", "100%/g 50%20.jpg", "ünï cødé/h.png"]


def _pairs(ids: list[str], folds: list[str], per: int) -> pd.DataFrame:
    rows = []
    for f in folds:
        for k in range(per):
            a, b = ids[k % len(ids)], ids[(k + 1) % len(ids)]
            rows.append((a, b, "x", "x", 1, f))
            rows.append((b, ids[(k + 3) % len(ids)], "x", "y", 0, f))
    return pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "fold"])


def test_cast_lists_with_spaces_tabs_newlines_read_back_exactly(tmp_path):
    paths = {f"id{k}": p for k, p in enumerate(BAD_NAMES)}
    pairs = _pairs(list(paths), ["0", "1", "val"], 5)
    write_cast_lists(pairs, paths, tmp_path, ["0", "1", "val"])
    text = (tmp_path / "0.list").read_text()
    assert "with%20space/b%20c.jpg" in text and "100%25/g%2050%2520.jpg" in text
    assert all(len(line.split()) == 3 for line in text.splitlines())
    back = read_cast_lists(tmp_path)
    for f in ("0", "1", "val"):
        got = back[back.fold == f][["path_a", "path_b", "label"]]
        sub = pairs[pairs.fold == f]
        if f != "val":
            sub = pd.concat([sub[sub.label == 1], sub[sub.label == 0]])
        else:
            sub = sub.iloc[cast_val_order(sub.label.to_numpy())]
        want = [(paths[a], paths[b], int(lab))
                for a, b, lab in zip(sub.image_a, sub.image_b, sub.label, strict=True)]
        assert list(got.itertuples(index=False, name=None)) == want


def test_plain_paths_are_written_unchanged():
    from facecast.io.list_paths import escape_list_path
    assert escape_list_path("CC11/black/0001/img 1.jpg".replace(" ", "_")) == \
        "CC11/black/0001/img_1.jpg"


def test_paths_that_cannot_read_back_are_refused_naming_them(tmp_path):
    paths = {"a": "ok/a.jpg", "b": "nbsp\u00a0name/b.jpg", "c": "ideo\u3000space/c.jpg"}
    pairs = pd.DataFrame({"image_a": ["a", "a"], "image_b": ["b", "c"], "identity_a": ["x", "x"],
                          "identity_b": ["y", "z"], "label": [0, 0], "fold": ["0", "0"]})
    with pytest.raises(ExportError, match="2 path.*ideo.*nbsp"):
        write_cast_lists(pairs, paths, tmp_path, ["0"])


def test_val_list_is_ten_blocks_of_genuine_then_impostor(tmp_path):
    labels = np.r_[np.ones(500, int), np.zeros(500, int)]
    order = cast_val_order(labels)
    assert sorted(order.tolist()) == list(range(1000))
    lay = labels[order].reshape(10, 100)
    assert (lay[:, :50] == 1).all() and (lay[:, 50:] == 0).all()
    # CAST's evaluation: KFold(10, shuffle=False) over the file -> every fold 50 + 50
    ids = [f"i{k}" for k in range(40)]
    pairs = _pairs(ids, ["val"], 500)
    write_cast_lists(pairs, {i: f"{i}.jpg" for i in ids}, tmp_path, ["val"])
    lab = np.array([int(x.split()[2]) for x in (tmp_path / "val.list").read_text().splitlines()])
    for fold in np.array_split(lab, 10):
        assert fold.sum() == 50 and len(fold) == 100
    # uneven counts: a permutation, ten blocks each genuine first then impostor
    uneven = np.r_[np.ones(23), np.zeros(17)].astype(int)
    o = cast_val_order(uneven)
    assert sorted(o.tolist()) == list(range(40))
    assert uneven[o].tolist()[:5] == [1, 1, 1, 0, 0]


def test_lfw_pairs_txt_with_spaces_in_names_reads_back(tmp_path):
    names = ["Jean Paul", "Ana%Maria", "Bob"]
    paths = {f"{n}/{n}_{k:04d}.jpg": n for n in names for k in (1, 2)}
    manifest = pd.DataFrame({"image_id": list(paths), "path": list(paths),
                             "identity": list(paths.values())})
    pairs = pd.DataFrame({
        "image_a": ["Jean Paul/Jean Paul_0001.jpg", "Ana%Maria/Ana%Maria_0001.jpg",
                    "Jean Paul/Jean Paul_0002.jpg", "Bob/Bob_0001.jpg"],
        "image_b": ["Jean Paul/Jean Paul_0002.jpg", "Ana%Maria/Ana%Maria_0002.jpg",
                    "Ana%Maria/Ana%Maria_0001.jpg", "Jean Paul/Jean Paul_0001.jpg"],
        "identity_a": ["Jean Paul", "Ana%Maria", "Jean Paul", "Bob"],
        "identity_b": ["Jean Paul", "Ana%Maria", "Ana%Maria", "Jean Paul"],
        "label": [1, 1, 0, 0], "fold": ["0"] * 4})
    write_lfw_pairs(pairs, image_numbers(manifest), tmp_path / "pairs.txt", ["0"])
    text = (tmp_path / "pairs.txt").read_text()
    assert "Jean%20Paul\t1\t2" in text and "Ana%25Maria" in text
    back = read_lfw_pairs(tmp_path / "pairs.txt")
    assert back[["image_a", "image_b", "label"]].values.tolist() == \
        pairs[["image_a", "image_b", "label"]].values.tolist()
