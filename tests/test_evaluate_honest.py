"""Issue 11, evaluation side: one-file folds, unresolvable TAR@FAR, imports that resolve
nothing, percent-decoded list paths, one threshold convention, HTML tables."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from facecast.datasets.lfw import read_lfw_pairs
from facecast.datasets.manifest import DatasetError
from facecast.evaluate.metrics import (
    default_folds,
    far_resolvable,
    roc_points,
    verification_metrics,
)
from facecast.evaluate.protocols import (
    import_protocol,
    read_cast_lists,
    stratified_folds,
)
from facecast.evaluate.stage import evaluate_benchmark
from facecast.evaluate.summary import write_summary
from facecast.evaluate.targets import job_config
from facecast.fairness.simulate import simulate
from facecast.fairness.stage import run_fairness
from facecast.fairness.threshold import group_rates, thresholds_at_fmr
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet
from facecast.report.html_tables import markdown_html, write_tsv_html


def _world(root, n_id=40, per=6, dim=32, noise=0.5, seed=0, space_in=()):
    """A manifest (paths ``pNN/k.jpg``) and one embedding shard with clustered identities.

    ``noise`` may be a per-identity array (identities of differing difficulty)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_id, dim))
    ids, ident, emb = [], [], []
    for i in range(n_id):
        for k in range(per):
            name = f"p {i:02d}" if i in space_in else f"p{i:02d}"
            ids.append(f"{name}/{k}.jpg")
            ident.append(name)
            emb.append(centres[i] + np.broadcast_to(noise, (n_id,))[i]
                       * rng.standard_normal(dim))
    emb = np.asarray(emb, np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    manifest = pd.DataFrame({"image_id": ids, "path": ids, "identity": ident,
                             "status": ["ok"] * len(ids)})
    write_parquet(manifest, root / "manifest.parquet")
    t = pa.table({"image_id": ids, "status": ["ok"] * len(ids), "message": [""] * len(ids),
                  "embedding": pa.array([list(map(float, e)) for e in emb],
                                        pa.list_(pa.float32(), dim)),
                  "norm": pa.array(np.ones(len(ids)), pa.float32())})
    write_parquet(t, root / "e0.parquet")
    return manifest


def _genuine_first(manifest, n_gen, n_imp, seed=3, sort=False):
    """Pairs as CAST ships them in ``0.list``: every genuine pair, then every impostor
    (``sort``: each class in identity order, so hard identities sit together)."""
    rng = np.random.default_rng(seed)
    by_id = manifest.groupby("identity")["path"].apply(list).to_dict()
    names = sorted(by_id)
    gen, imp = [], []
    while len(gen) < n_gen:
        who = names[rng.integers(len(names))]
        a, b = rng.choice(len(by_id[who]), 2, replace=False)
        gen.append((by_id[who][a], by_id[who][b], 1))
    while len(imp) < n_imp:
        x, y = rng.choice(len(names), 2, replace=False)
        imp.append((by_id[names[x]][rng.integers(6)], by_id[names[y]][rng.integers(6)], 0))
    if sort:
        gen, imp = sorted(gen), sorted(imp)
    return gen + imp


def _write_list(path, rows, escape=False):
    from facecast.io.list_paths import escape_list_path

    f = escape_list_path if escape else (lambda p: p)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{f(a)} {f(b)} {lab}\n" for a, b, lab in rows))


# -- item 1: one-file protocols get stratified folds -------------------------------------

def test_stratified_folds_balance_labels_and_are_seeded():
    y = np.r_[np.ones(300, int), np.zeros(300, int)]
    ident = np.repeat([f"i{k}" for k in range(60)], 10)
    f = stratified_folds(y, ident, 10, seed=5)
    for k in map(str, range(10)):
        assert (y[f == k] == 1).sum() == 30 and (y[f == k] == 0).sum() == 30
    # each identity's 10 pairs spread over the folds (10 pairs -> 10 distinct folds)
    assert all(len(set(f[ident == i])) == 10 for i in np.unique(ident))
    np.testing.assert_array_equal(f, stratified_folds(y, ident, 10, seed=5))
    assert (f != stratified_folds(y, ident, 10, seed=6)).any()


def test_one_file_cast_list_gets_interleaved_folds_and_right_std(tmp_path):
    # identities from easy to hard, listed in identity order, genuine first (CAST's layout)
    manifest = _world(tmp_path, noise=np.linspace(0.2, 1.3, 40))
    rows = _genuine_first(manifest, 300, 300, sort=True)
    _write_list(tmp_path / "lists/0.list", rows)
    _write_list(tmp_path / "lists/val.list", rows[:5] + rows[-5:])
    proto = import_protocol({"format": "cast_lists", "path": str(tmp_path / "lists")},
                            tmp_path / "manifest.parquet", tmp_path / "proto.parquet",
                            n_folds=10, seed=7)
    test = proto[proto.fold != "val"]
    assert sorted(test.fold.unique(), key=int) == [str(k) for k in range(10)]
    assert (test.groupby("fold")["label"].mean() == 0.5).all()
    assert (proto.loc[proto.fold == "val", "source_fold"] == "val").all()
    note = read_provenance(tmp_path / "proto.parquet")["folds"]
    assert note.startswith("stratified by label and identity over 1 file (0)") and "seed 7" in note
    again = import_protocol({"format": "cast_lists", "path": str(tmp_path / "lists")},
                            tmp_path / "manifest.parquet", tmp_path / "proto2.parquet",
                            n_folds=10, seed=7)
    pd.testing.assert_frame_equal(proto, again)  # deterministic

    row = evaluate_benchmark(tmp_path / "proto.parquet", [tmp_path / "e0.parquet"],
                             tmp_path / "eval/m/c.parquet", tmp_path / "eval/m/c", model="m",
                             benchmark="c", cfg={"fars": [0.01], "seed": 7})
    assert row["folds"] == note and row["n_folds"] == 10
    scored = read_parquet(tmp_path / "eval/m/c.parquet")
    used = scored[scored.fold != "val"]
    blocks = verification_metrics(used.score, used.label, default_folds(len(used)))  # old way
    assert blocks["accuracy_std"] > 0.08      # one-class blocks, hard identities together
    assert row["accuracy_std"] < 0.04
    assert row["accuracy"] > blocks["accuracy"] + 0.01


def test_ten_list_files_keep_their_folds(tmp_path):
    manifest = _world(tmp_path, n_id=20)
    rows = _genuine_first(manifest, 100, 100)
    for k in range(10):
        _write_list(tmp_path / f"lists/{k}.list", rows[10 * k:10 * k + 10]
                    + rows[100 + 10 * k:110 + 10 * k])
    proto = import_protocol({"path": str(tmp_path / "lists")}, tmp_path / "manifest.parquet",
                            tmp_path / "proto.parquet", seed=1)
    assert (proto.fold == proto.source_fold).all()
    assert read_provenance(tmp_path / "proto.parquet")["folds"] == "from files 0..9"


def test_one_fold_protocol_not_imported_is_stratified_by_the_stage(tmp_path):
    manifest = _world(tmp_path)
    rows = _genuine_first(manifest, 200, 200)
    pairs = pd.DataFrame(rows, columns=["image_a", "image_b", "label"])
    pairs["identity_a"] = pairs.image_a.str.split("/").str[0]
    pairs["fold"] = "0"
    write_parquet(pairs, tmp_path / "p.parquet")
    row = evaluate_benchmark(tmp_path / "p.parquet", [tmp_path / "e0.parquet"],
                             tmp_path / "o.parquet", tmp_path / "o", model="m", benchmark="p",
                             cfg={"fars": [0.01], "seed": 3})
    assert row["n_folds"] == 10 and row["accuracy_std"] < 0.05
    assert row["folds"].startswith("stratified by label and identity")


# -- item 4: imports that resolve no pair ---------------------------------------------

def test_import_resolving_no_pair_fails_naming_file_paths_and_prefix(tmp_path):
    manifest = _world(tmp_path, n_id=10)
    rows = [(f"/data/set/{a}", f"/data/set/{b}", y) for a, b, y in
            _genuine_first(manifest, 20, 20)]
    _write_list(tmp_path / "lists/0.list", rows)
    with pytest.raises(DatasetError) as err:
        import_protocol({"path": str(tmp_path / "lists"), "strip_prefix": "/data/other"},
                        tmp_path / "manifest.parquet", tmp_path / "proto.parquet")
    msg = str(err.value)
    assert "no pair resolves" in msg and "0.list" in msg
    assert rows[0][0] in msg and "strip_prefix='/data/other'" in msg
    assert not (tmp_path / "proto.parquet").exists()
    # the right prefix resolves every pair
    ok = import_protocol({"path": str(tmp_path / "lists"), "strip_prefix": "/data/set"},
                         tmp_path / "manifest.parquet", tmp_path / "proto.parquet")
    assert (ok.status == "ok").all()


def test_partly_resolved_import_reports_pairs_and_skipped_in_summary(tmp_path, caplog):
    manifest = _world(tmp_path, n_id=20)
    rows = _genuine_first(manifest, 100, 100)
    rows[0] = ("gone/1.jpg", rows[0][1], 1)
    rows[150] = (rows[150][0], "gone/2.jpg", 0)
    _write_list(tmp_path / "lists/0.list", rows)
    with caplog.at_level(logging.WARNING):
        proto = import_protocol({"path": str(tmp_path / "lists")},
                                tmp_path / "manifest.parquet", tmp_path / "proto.parquet")
    assert (proto.status == "not_in_manifest").sum() == 2
    assert "gone/1.jpg" in caplog.text and "2 of 200 pairs" in caplog.text
    evaluate_benchmark(tmp_path / "proto.parquet", [tmp_path / "e0.parquet"],
                       tmp_path / "eval/m/c.parquet", tmp_path / "eval/m/c", model="m",
                       benchmark="c", cfg={"fars": [0.01]})
    write_summary([tmp_path / "eval/m/c/metrics.parquet"], tmp_path / "s.parquet",
                  tmp_path / "s.md", benchmarks=["c"], models=["m"], fars=[0.01],
                  out_html=tmp_path / "s.html")
    md = (tmp_path / "s.md").read_text()
    line = [ln for ln in md.splitlines() if ln.startswith("| c | m |")][0]
    cells = [c.strip() for c in line.strip("|").split("|")]
    # evaluate.failed: nonmatch (the default): an image the dataset lacks has no feature;
    # its pairs count (as non-matches) and the table says so (n_failed, failed statuses)
    assert cells[2:6] == ["200", "100", "100", "2"] and "not_in_manifest: 2" in cells[6]
    assert cells[7] == "0" and "stratified by label" in cells[9]


# -- item 3: unresolvable TAR@FAR -------------------------------------------------------

def test_unresolvable_tar_at_far_is_na_in_tables_and_flagged(tmp_path, caplog):
    manifest = _world(tmp_path, n_id=20)
    rows = _genuine_first(manifest, 100, 262)
    _write_list(tmp_path / "lists/0.list", rows)
    import_protocol({"path": str(tmp_path / "lists")}, tmp_path / "manifest.parquet",
                    tmp_path / "proto.parquet")
    with caplog.at_level(logging.WARNING):
        evaluate_benchmark(tmp_path / "proto.parquet", [tmp_path / "e0.parquet"],
                           tmp_path / "eval/m/c.parquet", tmp_path / "eval/m/c", model="m",
                           benchmark="c", cfg={"fars": [1e-2, 1e-4]})
    assert "TAR@FAR=1e-4" in caplog.text and "262" in caplog.text
    m = read_parquet(tmp_path / "eval/m/c/metrics.parquet")
    assert bool(m["resolvable@far=1e-2"][0]) and not bool(m["resolvable@far=1e-4"][0])
    write_summary([tmp_path / "eval/m/c/metrics.parquet"], tmp_path / "s.parquet",
                  tmp_path / "s.md", benchmarks=["c"], models=["m"], fars=[1e-2, 1e-4],
                  out_html=tmp_path / "s.html")
    md = (tmp_path / "s.md").read_text()
    tar4 = md.split("## TAR at FAR=0.0001")[1].split("##")[0]
    assert "| m | n/a (262 impostors) | n/a |" in tar4
    tar2 = md.split("## TAR at FAR=0.01")[1].split("##")[0]
    assert f"| m | {100 * m['tar@far=1e-2'][0]:.2f} |" in tar2
    assert "n/a (262 impostors)" in (tmp_path / "s.html").read_text()
    assert not read_parquet(tmp_path / "s.parquet")["resolvable@far=1e-4"][0]


def test_fairness_report_marks_unresolvable_fmr_targets(tmp_path, caplog):
    attrs, pairs = simulate(40, 4, seed=2)
    write_parquet(attrs, tmp_path / "attributes.parquet")
    write_parquet(pairs, tmp_path / "scores.parquet")
    n_imp = int((pairs.label == 0).sum())
    assert 100 <= n_imp < 10_000
    cfg = {"protected": {"gender": {"column": "label_male", "bins": [0.5],
                                    "labels": ["female", "male"]}},
           "legitimate": {}, "min_pairs": 3, "min_groups": 1, "n_boot": 3, "hard_pairs": 2,
           "thresholds": {"fmr_targets": [1e-2, 1e-4], "fixed": [], "from_protocol": ""}}
    with caplog.at_level(logging.WARNING):
        summary = run_fairness(tmp_path / "scores.parquet", tmp_path / "attributes.parquet",
                               tmp_path / "out", cfg, model="m", protocol="p", seed=1)
    assert summary["resolvable@fmr=0.01"] and not summary["resolvable@fmr=0.0001"]
    assert "fmr=0.0001" in caplog.text
    thr = read_parquet(tmp_path / "out/thresholds.parquet")
    assert thr["resolvable"].tolist() == [True, False]
    report = (tmp_path / "out/report.md").read_text()
    note = f"n/a ({n_imp} impostors)"
    line = [ln for ln in report.splitlines() if ln.startswith("| fmr=0.0001 |")][0]
    assert note in line
    line = [ln for ln in report.splitlines() if ln.startswith("| fmr=0.01 |")][0]
    assert "impostors)" not in line          # resolvable; a zero-rate ratio has its own n/a
    assert all(c.strip().startswith("n/a (0 false") for c in line.split("|") if "n/a" in c)
    assert note in (tmp_path / "out/report.html").read_text()
    assert far_resolvable(1000, 1e-3) and not far_resolvable(999, 1e-3)


# -- item 10: one threshold convention --------------------------------------------------

def test_threshold_copied_between_evaluate_and_fairness_gives_same_decisions():
    rng = np.random.default_rng(4)
    scores = np.round(rng.normal(size=3000), 2)  # many ties
    labels = (rng.random(3000) < 0.5).astype(int)
    scores[labels == 1] += 1.5
    group = np.array(["g"] * 3000, dtype=object)
    imp = scores[labels == 0]
    far, tar, thr = roc_points(scores, labels)
    m = verification_metrics(scores, labels, default_folds(len(scores)), fars=[1e-2, 1e-3])
    for key in ("1e-2", "1e-3"):
        t = m[f"threshold@far={key}"]   # evaluate -> fairness
        r = group_rates(scores, labels, group, [t]).iloc[0]
        assert r["fmr"] == pytest.approx(m[f"far_reached@far={key}"])
        assert 1 - r["fnmr"] == pytest.approx(m[f"tar@far={key}"])
        assert r["false_matches"] == (imp >= t).sum()
    for target in (1e-2, 1e-3):        # fairness -> evaluate
        t = thresholds_at_fmr(imp, [target])[0]
        accept = scores >= t
        assert accept[labels == 0].mean() <= target
        i = np.flatnonzero(far <= target)[-1]   # evaluate's operating point, same decisions
        assert accept[labels == 0].mean() == pytest.approx(far[i])
        assert accept[labels == 1].mean() == pytest.approx(tar[i])
        r = group_rates(scores, labels, group, [t]).iloc[0]
        assert r["fmr"] == pytest.approx(accept[labels == 0].mean())
    # a threshold equal to a score accepts that score in both stages
    t = float(scores[labels == 0].max())
    r = group_rates(scores, labels, group, [t]).iloc[0]
    assert r["false_matches"] == (imp == t).sum() >= 1


# -- issue 16 item 4: percent-decoded list paths ----------------------------------------

def test_importers_decode_percent_encoded_paths(tmp_path):
    _world(tmp_path, n_id=6, space_in=(1, 2))
    rows = [("p 01/0.jpg", "p 01/1.jpg", 1), ("p 02/0.jpg", "p00/1.jpg", 0),
            ("p 01/2.jpg", "p 01/3.jpg", 1), ("p 02/1.jpg", "p03/1.jpg", 0)]
    _write_list(tmp_path / "lists/0.list", rows, escape=True)
    _write_list(tmp_path / "lists/1.list", rows, escape=True)
    assert "p%2001/0.jpg" in (tmp_path / "lists/0.list").read_text()
    raw = read_cast_lists(tmp_path / "lists")
    assert raw.path_a.tolist()[:2] == ["p 01/0.jpg", "p 02/0.jpg"]
    proto = import_protocol({"path": str(tmp_path / "lists")}, tmp_path / "manifest.parquet",
                            tmp_path / "proto.parquet")
    assert (proto.status == "ok").all() and proto.identity_a[0] == "p 01"
    (tmp_path / "pairs.txt").write_text("1 1\nJean%20Luc 1 2\nA%25B 1 Jean%20Luc 3\n")
    lfw = read_lfw_pairs(tmp_path / "pairs.txt")
    assert lfw.image_a.tolist() == ["Jean Luc/Jean Luc_0001.jpg", "A%B/A%B_0001.jpg"]
    assert lfw.identity_b.tolist() == ["Jean Luc", "Jean Luc"]


# -- item 12 (unit part) and item 11 helpers -------------------------------------------

def test_job_config_leaves_out_imports_and_lists():
    cfg = {"models": ["a"], "benchmarks": ["x"], "fars": [1e-3], "thresholds": "exact",
           "include_val": False, "n_folds": 10, "imports": {"c": {"path": "/x"}}}
    assert job_config(cfg, 7) == {"fars": [1e-3], "thresholds": "exact",
                                  "include_val": False, "n_folds": 10, "seed": 7}


def test_markdown_and_tsv_render_as_html_tables(tmp_path):
    body = markdown_html("# T\n\ntext a|b\n\n| x | y |\n|---|---|\n| 1 \\| 2 | 3.5 |\n"
                         "![alt](f.png)\n")
    assert "<h1>T</h1>" in body and "<td>1 | 2</td><td>3.5</td>" in body
    assert "<th>x</th>" in body and '<img src="f.png" alt="alt">' in body
    (tmp_path / "s.tsv").write_text("fold\tgenuine\timpostor\n0\t50\t50\nall\t500\t500\n")
    write_tsv_html(tmp_path / "s.tsv", tmp_path / "s.html", "Pairs <b>")
    html = (tmp_path / "s.html").read_text()
    assert "<td>all</td><td>500</td><td>500</td>" in html and "Pairs &lt;b&gt;" in html
