"""Protocols (CAST lists, LFW pairs), scoring, the evaluation stage and the summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

from facecast.analysis.exports import write_cast_lists
from facecast.datasets.manifest import DatasetError
from facecast.embed.read import load_embeddings
from facecast.evaluate.protocols import import_protocol, load_protocol, read_cast_lists
from facecast.evaluate.scoring import score_pairs
from facecast.evaluate.stage import evaluate_benchmark
from facecast.evaluate.summary import write_summary
from facecast.io.parquet_io import read_parquet, write_parquet


def _embed_shard(path, ids, emb, bad=()):
    vals = [None if i in bad else list(map(float, e)) for i, e in zip(ids, emb, strict=True)]
    t = pa.table({"image_id": ids, "status": ["embed_error" if i in bad else "ok" for i in ids],
                  "message": [""] * len(ids),
                  "embedding": pa.array(vals, pa.list_(pa.float32(), emb.shape[1])),
                  "norm": pa.array(np.ones(len(ids)), pa.float32())})
    write_parquet(t, path)


def _world(tmp_path, n_id=30, per=4, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_id, dim))
    ids, ident, emb = [], [], []
    for i in range(n_id):
        for k in range(per):
            ids.append(f"p{i:02d}/{k}.jpg")
            ident.append(f"p{i:02d}")
            emb.append(centres[i] + 0.6 * rng.standard_normal(dim))
    emb = np.asarray(emb, np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    manifest = pd.DataFrame({"image_id": ids, "path": ids, "identity": ident,
                             "status": ["ok"] * (len(ids) - 1) + ["missing"]})
    write_parquet(manifest, tmp_path / "manifest.parquet")
    half = len(ids) // 2
    _embed_shard(tmp_path / "e0.parquet", ids[:half], emb[:half], bad={ids[3]})
    _embed_shard(tmp_path / "e1.parquet", ids[half:], emb[half:])
    return manifest, emb


def _pairs(manifest, n=200, seed=1):
    rng = np.random.default_rng(seed)
    ids, ident = manifest.image_id.to_numpy(), manifest.identity.to_numpy()
    rows = []
    while len(rows) < n:
        a, b = rng.integers(0, len(ids), 2)
        if a == b:
            continue
        same = ident[a] == ident[b]
        if (len(rows) % 2 == 0) != same:
            if not same:
                b = a - a % 4 + (a + 1) % 4  # a same-identity partner
                same = True
            else:
                continue
        rows.append((ids[a], ids[b], ident[a], ident[b], int(same), str(len(rows) * 10 // n)))
    return pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "fold"])


def test_load_embeddings_reads_only_ok_and_wanted_rows(tmp_path):
    manifest, emb = _world(tmp_path)
    ids, got = load_embeddings([tmp_path / "e0.parquet", tmp_path / "e1.parquet"],
                               ["p00/0.jpg", "p00/3.jpg", "p10/1.jpg", "nope"])
    assert sorted(ids) == ["p00/0.jpg", "p10/1.jpg"]   # p00/3 has a null embedding
    k = list(ids).index("p10/1.jpg")
    np.testing.assert_allclose(got[k], emb[41], rtol=1e-6)


def test_score_pairs_keeps_every_pair_with_a_status(tmp_path):
    manifest, emb = _world(tmp_path)
    ids, e = load_embeddings([tmp_path / "e0.parquet", tmp_path / "e1.parquet"])
    pairs = pd.DataFrame({"image_a": ["p00/0.jpg", "p00/3.jpg", "p01/0.jpg"],
                          "image_b": ["p00/1.jpg", "p00/1.jpg", "p01/1.jpg"],
                          "label": [1, 1, 1], "fold": "0",
                          "status": ["ok", "ok", "missing"], "message": ["", "", "gone"]})
    s = score_pairs(pairs, ids, e)
    assert s.status.tolist() == ["ok", "no_embedding", "missing"]
    assert "image_a p00/3.jpg" in s.message[1] and s.message[2] == "gone"
    assert s.score[0] == pytest.approx(float(emb[0] @ emb[1]), abs=1e-6)
    assert s.score[1:].isna().all()


def test_cast_lists_import_round_trip_and_errors(tmp_path):
    manifest, _ = _world(tmp_path)
    pairs = _pairs(manifest)
    paths = dict(zip(manifest.image_id, manifest.path, strict=True))
    write_cast_lists(pairs, paths, tmp_path / "lists", [str(k) for k in range(10)])
    raw = read_cast_lists(tmp_path / "lists")
    assert len(raw) == len(pairs)
    imported = import_protocol({"format": "cast_lists", "path": str(tmp_path / "lists")},
                               tmp_path / "manifest.parquet", tmp_path / "proto.parquet")
    key = ["fold", "image_a", "image_b", "label"]
    a = imported[key].sort_values(key).reset_index(drop=True)
    b = pairs[key].astype({"label": np.int8}).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    last = manifest.image_id.iloc[-1]
    bad = imported[(imported.image_a == last) | (imported.image_b == last)]
    assert (bad.status == "missing").all()
    assert (tmp_path / "lists/3.list").read_text().splitlines()[0].endswith(" 1")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken/0.list").write_text("a.jpg b.jpg 1\nonly_two 1\n")
    with pytest.raises(DatasetError, match="0.list:2"):
        read_cast_lists(tmp_path / "broken")


def test_evaluate_benchmark_and_summary(tmp_path):
    manifest, emb = _world(tmp_path)
    pairs = _pairs(manifest)
    pairs.loc[len(pairs)] = ["p00/0.jpg", "p00/1.jpg", "p00", "p00", 1, "val"]
    write_parquet(pairs, tmp_path / "pairs.parquet")
    shards = [tmp_path / "e0.parquet", tmp_path / "e1.parquet"]
    metric_paths = []
    for model in ("m1", "m2"):
        row = evaluate_benchmark(tmp_path / "pairs.parquet", shards,
                                 tmp_path / f"eval/{model}/b.parquet", tmp_path / f"eval/{model}/b",
                                 model=model, benchmark="b", cfg={"fars": [0.01]})
        metric_paths.append(tmp_path / f"eval/{model}/b/metrics.parquet")
    scored = read_parquet(tmp_path / "eval/m1/b.parquet")
    assert len(scored) == len(pairs)                      # every pair reaches the output
    # evaluate.failed: nonmatch (the default): the pairs of the missing image count as
    # non-matches below every score (any floor under -1 ranks as -inf does)
    used = scored[scored.fold != "val"]
    failed = int((used.status != "ok").sum())
    assert row["n_pairs"] == len(used) == 200 and row["n_skipped"] == 0
    assert row["n_failed"] == failed > 0 and row["failed"] == "nonmatch"
    assert row["auc"] == pytest.approx(roc_auc_score(used.label, used.score.fillna(-10.0)))
    assert 0.5 < row["accuracy"] <= 1 and row["n_folds"] == 10
    for f in ("roc.parquet", "roc.png", "det.png"):
        assert (tmp_path / "eval/m1/b" / f).stat().st_size > 0
    assert load_protocol(tmp_path / "eval/m1/b.parquet")["score"].notna().any()
    long = write_summary(metric_paths, tmp_path / "summary.parquet", tmp_path / "summary.md",
                         benchmarks=["b"], models=["m1", "m2"], fars=[0.01])
    assert len(long) == 2
    md = (tmp_path / "summary.md").read_text()
    assert "| m1 |" in md and "average" in md and "TAR at FAR=0.01" in md
    assert row["n_held_out"] == 1 and "1 of 201 pairs held out (val)" in md
