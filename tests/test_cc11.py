"""CAST's CC11 as one .bin (layout cc11): blocks, folds, figures and tables as cc11.py."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from sklearn.model_selection import KFold

from facecast.config.bin_sets import CC11_LABELS, CC11_NAMES
from facecast.datasets.insightface_bin import read_insightface_bin, write_bin
from facecast.datasets.manifest import DatasetError
from facecast.datasets.stage import build_manifest
from facecast.evaluate import stage as eval_stage
from facecast.evaluate.bin_protocol import bin_pairs
from facecast.evaluate.bin_suite import write_bin_suite, write_cc11_table
from facecast.evaluate.protocols import import_protocol, load_protocol
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet

PER_BLOCK = 60  # pairs per CC11 block: 11 x 60 = 660 pairs, 6 per fold


def _jpeg(seed: int) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=70)
    return buf.getvalue()


def cc11_py(embeddings: np.ndarray, issame_list: list[bool]) -> list[tuple[float, float]]:
    """A port of CAST's cc11.py evaluation loop (in %): the image tensor cut into 11 equal
    blocks by image count, ``issame_list[int(i*(s/2)):int((i+1)*(s/2))]``, each block
    through evaluation.test (normalise, squared L2 of images 2k and 2k+1, calculate_roc with
    KFold(10, shuffle=False), thresholds np.arange(0, 4, 0.01)), then acc*100, std*100."""
    thresholds = np.arange(0, 4, 0.01)

    def accuracy(threshold, dist, actual):
        pred = np.less(dist, threshold)
        tp = np.sum(np.logical_and(pred, actual))
        tn = np.sum(np.logical_and(np.logical_not(pred), np.logical_not(actual)))
        return float(tp + tn) / dist.size

    size = int(embeddings.shape[0] / 11)
    out = []
    for i in range(11):
        emb = embeddings[i * size:(i + 1) * size]
        issame = np.asarray(issame_list[int(i * (size / 2)):int((i + 1) * (size / 2))])
        emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        dist = np.sum(np.square(emb[0::2] - emb[1::2]), 1)
        accs = np.zeros(10)
        indices = np.arange(len(issame))
        for f, (train, test) in enumerate(KFold(n_splits=10, shuffle=False).split(indices)):
            train_acc = [accuracy(t, dist[train], issame[train]) for t in thresholds]
            accs[f] = accuracy(thresholds[int(np.argmax(train_acc))], dist[test], issame[test])
        out.append((np.mean(accs) * 100, np.std(accs) * 100))
    return out


@pytest.fixture(scope="module")
def cc11(tmp_path_factory):
    """A CC11-layout .bin, its manifest, embeddings of graded difficulty per block, and the
    eleven block protocols imported and evaluated."""
    d = tmp_path_factory.mktemp("cc11")
    rng = np.random.default_rng(3)
    n_pairs = 11 * PER_BLOCK
    issame = (rng.random(n_pairs) < 0.5).tolist()
    write_bin(d / "cc11_val.bin", [_jpeg(i) for i in range(2 * n_pairs)], issame, protocol=4)
    spec = {"kind": "insightface_bin", "path": str(d / "cc11_val.bin"), "layout": "cc11"}
    manifest = build_manifest(spec, d / "dataset", d / "manifest.parquet")
    dim = 12
    emb = rng.standard_normal((2 * n_pairs, dim))
    for k in np.flatnonzero(issame):
        noise = 0.6 + 0.1 * (k // PER_BLOCK)  # later blocks are harder
        emb[2 * k + 1] = emb[2 * k] + rng.standard_normal(dim) * noise
    table = pa.table({
        "image_id": manifest["image_id"].tolist(), "status": manifest["status"].tolist(),
        "message": manifest["message"].tolist(),
        "embedding": pa.FixedSizeListArray.from_arrays(
            pa.array(emb.astype(np.float32).reshape(-1)), dim),
        "norm": pa.array(np.ones(len(manifest), np.float32))})
    write_parquet(table, d / "emb.parquet")
    items = []
    with pytest.MonkeyPatch.context() as mp:  # the figures are under test, not the plots
        mp.setattr(eval_stage, "plot_roc", lambda *a, **k: None)
        mp.setattr(eval_stage, "plot_det", lambda *a, **k: None)
        for b, name in enumerate(CC11_NAMES):
            proto = d / "protocols" / f"{name}.parquet"
            import_protocol({"format": "insightface_bin", "path": str(d / "cc11_val.bin"),
                             "layout": "cc11", "block": b}, d / "manifest.parquet", proto)
            out = d / "eval" / "m" / name
            eval_stage.evaluate_benchmark(proto, [d / "emb.parquet"],
                                          d / "eval" / "m" / f"{name}.parquet", out,
                                          model="m", benchmark=name)
            items.append({"set": "cc11_val", "dataset": "cc", "protocol": name,
                          "block": name, "model": "m", "path": str(out / "metrics.parquet")})
    ref = cc11_py(emb.astype(np.float32).astype(np.float64), issame)
    return d, issame, ref, items


def test_blocks_and_folds_are_cc11_py_slices(cc11):
    d, issame, _, _ = cc11
    size = 2 * len(issame) // 11  # cc11.py: images per sub-benchmark
    for b in (0, 4, 10):
        pairs = bin_pairs(d / "cc11_val.bin", layout="cc11", block=b)
        lo, hi = int(b * (size / 2)), int((b + 1) * (size / 2))
        assert pairs["pair_index"].tolist() == list(range(lo, hi))
        assert pairs["path_a"].iloc[0] == f"cc11_val.bin#{b * size}"
        assert pairs["label"].astype(bool).tolist() == issame[lo:hi]
        expect = np.zeros(hi - lo, int)
        for f, (_, test) in enumerate(KFold(n_splits=10, shuffle=False).split(
                np.arange(hi - lo))):
            expect[test] = f
        assert pairs["fold"].astype(int).tolist() == expect.tolist()
    proto = load_protocol(d / "protocols" / "latinx.parquet")
    assert len(proto) == PER_BLOCK and proto["fold"].nunique() == 10
    assert "CC11 block 4 of 11, latinx" in read_provenance(
        d / "protocols" / "latinx.parquet")["folds"]


def test_block_accuracies_are_cc11_py_figures(cc11):
    d, _, ref, _ = cc11
    for (acc, std), name in zip(ref, CC11_NAMES, strict=True):
        row = read_parquet(d / "eval" / "m" / name / "metrics.parquet").iloc[0]
        assert 100 * row["accuracy"] == pytest.approx(acc, abs=1e-9), name
        assert 100 * row["accuracy_std"] == pytest.approx(std, abs=1e-9), name
    assert ref[0][0] > ref[-1][0]  # the graded difficulty shows: a real discrimination


def test_cc11_table_is_laid_out_like_cc11_py(cc11, tmp_path):
    d, _, ref, items = cc11
    missing = [{**items[0], "model": "other", "path": str(tmp_path / "absent.parquet")}]
    table = write_cc11_table(items + missing, tmp_path / "cc11.parquet",
                             tmp_path / "cc11.md", tmp_path / "cc11.html",
                             models=["m", "other"], dataset="cc", source="cc11_val.bin")
    md = (tmp_path / "cc11.md").read_text()
    header = "| model | " + " | ".join(CC11_LABELS) + " | Avg |"
    assert header in md
    cells = [f"{a:.2f}+-{s:.2f}" for a, s in ref]
    avg = f"{np.mean([a for a, _ in ref]):.2f}+-{np.mean([s for _, s in ref]):.2f}"
    assert "| m | " + " | ".join(cells) + f" | {avg} |" in md
    # the model whose metrics are missing: every cell says why, the average too
    other = next(line for line in md.splitlines() if line.startswith("| other |"))
    assert other.count("n/a (not evaluated)") == 10 and "n/a (no metrics file)" in other
    assert "n/a (0 of 11 blocks have a figure)" in other
    # cc11.py's own printout, line for line
    assert f"| {'Black'.ljust(11)} | {cells[0]}|" in md
    assert f"| {'Avg'.ljust(11)} | {avg}|" in md
    html = (tmp_path / "cc11.html").read_text()
    assert "<pre>" in html and "<table>" in html and "G&amp;FH" in html
    avg_row = table[(table["model"] == "m") & (table["block"] == "average")].iloc[0]
    assert 100 * avg_row["accuracy"] == pytest.approx(np.mean([a for a, _ in ref]))
    assert 100 * avg_row["accuracy_std"] == pytest.approx(np.mean([s for _, s in ref]))
    assert set(table["status"]) == {"ok", "missing", "incomplete"}


def test_suite_puts_cc11_average_beside_pairs_sets(cc11, tmp_path):
    d, _, ref, items = cc11
    lfw = {"set": "lfw", "dataset": "lfwb", "protocol": "lfw", "block": "", "model": "m",
           "path": str(d / "eval" / "m" / "black" / "metrics.parquet")}  # any pairs figure
    rows = write_bin_suite([lfw, *items], tmp_path / "s.parquet", tmp_path / "s.md",
                           tmp_path / "s.html", models=["m"], flips={"m": True})
    assert rows["set"].tolist() == ["lfw", "cc11_val"]
    md = (tmp_path / "s.md").read_text()
    assert "| model | lfw | cc11_val |" in md
    avg = np.mean([a for a, _ in ref]) / 100
    got = rows.set_index("set").loc["cc11_val"]
    assert got["accuracy"] == pytest.approx(avg) and got["status"] == "ok"
    assert f"[lfw]Accuracy-Flip: {ref[0][0] / 100:1.5f}+-{ref[0][1] / 100:1.5f}" in md
    assert got["n_pairs"] == 11 * PER_BLOCK


@pytest.mark.parametrize("n_pairs", [11 * 10 * 3 + 11, 11 * 15, 100])
def test_a_count_that_does_not_split_is_a_clear_error(tmp_path, n_pairs):
    p = tmp_path / "cc11.bin"
    write_bin(p, [b"x"] * (2 * n_pairs), [True] * n_pairs)
    with pytest.raises(DatasetError, match=rf"cc11.bin: {n_pairs:,} pairs do not split into "
                                           r"layout cc11's 11 equal consecutive blocks"):
        read_insightface_bin(p, layout="cc11")
    with pytest.raises(DatasetError, match="multiple of 110"):
        bin_pairs(p, layout="cc11", block=0)
    assert len(read_insightface_bin(p)) == 2 * n_pairs  # layout pairs takes any count
