"""CAST's CC11 as one .bin (layout cc11): blocks, folds, figures and tables as cc11.py.

The figures are compared with CAST's own ``cc11.py`` evaluation, recorded on the
embeddings of ``tests/reference/cc11_inputs.py`` (``tests/data/reference/cc11/
cc11_evaluation.json``, ``tests/reference/cc11_recorder.py``); no CAST code is here.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from reference import cc11_inputs
from reference.common import read_record
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

PER_BLOCK = cc11_inputs.PER_BLOCK  # pairs per CC11 block: 11 x 60 = 660 pairs, 6 per fold


def _jpeg(seed: int) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=70)
    return buf.getvalue()


@pytest.fixture(scope="module")
def cc11(tmp_path_factory):
    """A CC11-layout .bin, its manifest, embeddings of graded difficulty per block, and the
    eleven block protocols imported and evaluated."""
    d = tmp_path_factory.mktemp("cc11")
    issame, emb = cc11_inputs.graded()
    n_pairs, dim = len(issame), emb.shape[1]
    write_bin(d / "cc11_val.bin", [_jpeg(i) for i in range(2 * n_pairs)], issame, protocol=4)
    spec = {"kind": "insightface_bin", "path": str(d / "cc11_val.bin"), "layout": "cc11"}
    manifest = build_manifest(spec, d / "dataset", d / "manifest.parquet")
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
    rec = read_record("cc11", "cc11_evaluation")["outputs"]
    ref = list(zip(rec["acc"], rec["std"], strict=True))  # cc11.py's figures, in %
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
    """facecast's per-block 10-fold accuracy and std equal what CAST's cc11.py computed
    (recorded) on the same embeddings, to 1e-9 %."""
    d, _, ref, _ = cc11
    rec = read_record("cc11", "cc11_evaluation")
    assert rec["inputs"]["builder"] == "cc11_inputs.graded"
    assert rec["inputs"]["seed"] == cc11_inputs.SEED and len(ref) == len(CC11_NAMES)
    for (acc, std), name in zip(ref, CC11_NAMES, strict=True):
        row = read_parquet(d / "eval" / "m" / name / "metrics.parquet").iloc[0]
        assert 100 * row["accuracy"] == pytest.approx(acc, abs=1e-9), name
        assert 100 * row["accuracy_std"] == pytest.approx(std, abs=1e-9), name
    # the figures discriminate: blocks differ, and no block is perfect or at chance
    accs = [a for a, _ in ref]
    assert len({(round(a, 6), round(v, 6)) for a, v in ref}) >= 9
    assert 80 < min(accs) and max(accs) < 100
    assert ref[0][0] > ref[-1][0]  # the noise grows block by block


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
    # the figures cc11.py printed (recorded), block by block and its Avg line
    printed = read_record("cc11", "cc11_evaluation")["outputs"]["printed"]
    figures = [line.rstrip("|").split()[-1] for line in printed if line.startswith("| ")]
    assert figures == [*cells, avg] and printed[-2].startswith("| Avg ")
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


def _two_block_export(folder) -> str:
    """A facecast export of two 55-pair blocks (110 pairs: a multiple of 110, so CAST's
    eleven equal slices would cut it silently) with the sidecar export.bins writes."""
    p = folder / "two.bin"
    issame = [k % 55 < 30 for k in range(110)]
    write_bin(p, [b"x"] * 220, issame)
    blocks = [{"name": n, "first_pair": 55 * i, "n_pairs": 55}
              for i, n in enumerate(["black", "young"])]
    (folder / "two.json").write_text(json.dumps({"blocks": blocks, "n_pairs": 110,
                                                 "cc11_compatible": False,
                                                 "cc11_labels": None}))
    return str(p)


def test_layout_cc11_refuses_an_export_its_sidecar_marks_incompatible(tmp_path):
    """The sidecar's cc11_compatible: false stops layout cc11 (reader, protocol import,
    config check naming the key); layout blocks reads the two blocks as they are."""
    from facecast.datasets.checks import config_errors

    p = _two_block_export(tmp_path)
    with pytest.raises(DatasetError, match=r"two.bin: layout cc11 refused: its sidecar .*"
                                           r"two.json says cc11_compatible: false \(an export "
                                           r"of 2 block\(s\): black, young\).*layout: blocks"):
        read_insightface_bin(p, "cc11")
    with pytest.raises(DatasetError, match="cc11_compatible: false"):
        bin_pairs(p, layout="cc11", block=0)
    errors = config_errors({"datasets": {"x": {"kind": "insightface_bin", "path": p,
                                               "layout": "cc11"}}})
    assert [e for e in errors if "cc11_compatible" in e][0].startswith("datasets.x.layout: cc11:")
    assert len(read_insightface_bin(p, "blocks")) == 220
    assert bin_pairs(p, layout="blocks", block=1)["pair_index"].tolist() == list(range(55, 110))
    # the same file without that sidecar is cut as cc11.py cuts it: 11 blocks of 10 pairs
    (tmp_path / "two.json").unlink()
    assert bin_pairs(p, layout="cc11", block=6)["pair_index"].tolist() == list(range(60, 70))
    (tmp_path / "two.json").write_text(json.dumps({"blocks": [], "cc11_compatible": True}))
    assert len(read_insightface_bin(p, "cc11")) == 220


def test_accept_rule_is_strictly_below_the_threshold():
    """insightface's / cc11.py's rule "same" iff d < t on the grid np.arange(0, 4, 0.01):
    per fold a genuine pair exactly on the grid point 1.0 and an impostor just above it
    (d = 1.005, inside (1.0, 1.01)), a genuine at d = 0.5 and an impostor at d = 3.0.
    Under d < t no grid threshold takes the genuine at 1.0 without the impostor at 1.005:
    the best is 3 of 4, first reached at t = 0.51; d <= t would take 4 of 4 at t = 1.0."""
    from facecast.evaluate.metrics import (
        INSIGHTFACE_THRESHOLDS,
        default_folds,
        kfold_accuracy,
        predicts_same,
        squared_distance,
    )

    scores = np.tile([0.5, 0.4975, 0.75, -0.5], 10)
    labels = np.tile([1, 0, 1, 0], 10)
    dist = squared_distance(scores)
    assert dist[0] == INSIGHTFACE_THRESHOLDS[100] == 1.0 and 1.0 < dist[1] < 1.01
    assert dist[2] == INSIGHTFACE_THRESHOLDS[50] == 0.5
    assert predicts_same(scores[:3], 1.0).tolist() == [False, False, True]
    assert predicts_same(scores[:3], 0.5).tolist() == [False, False, False]
    res = kfold_accuracy(scores, labels, default_folds(40, 10))
    np.testing.assert_array_equal(res.accuracies, np.full(10, 0.75))
    np.testing.assert_array_equal(res.thresholds, np.full(10, INSIGHTFACE_THRESHOLDS[51]))
    # the decisions a fold's threshold makes are the rule's, pair by pair
    folds = default_folds(40, 10)
    assert res.correct(scores, labels, folds).reshape(10, 4).tolist() == \
        [[False, True, True, True]] * 10
