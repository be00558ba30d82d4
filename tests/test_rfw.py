"""RFW (issue 41): the test release (tests/data/rfw, RFW's layout) and its .bin form as one
dataset, one protocol per set in file order, the papers' table (accuracy per set, std
across sets, SER), and bad input that loses nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA

from facecast.config.fair_sets import RFW_SETS, implied_protocols
from facecast.datasets.checks import config_errors
from facecast.datasets.insightface_bin import write_bin
from facecast.datasets.manifest import DatasetError
from facecast.datasets.rfw import read_rfw_pairs, rfw_files
from facecast.datasets.stage import build_manifest
from facecast.evaluate.metrics import default_folds, kfold_accuracy
from facecast.evaluate.rfw_table import average_row, write_rfw_table
from facecast.evaluate.stage import write_evaluation, write_set_protocol
from facecast.io.parquet_io import read_parquet, write_parquet

RFW = TEST_DATA / "rfw"


def _lmk(set_name: str) -> dict[str, list[float]]:
    out = {}
    for line in rfw_files(RFW, set_name)["lmk"].read_text().splitlines():
        f = line.split("\t")
        out[f"data/{set_name}/{f[0].split('/')[-2]}/{f[0].split('/')[-1]}"] = \
            [float(v) for v in f[2:]]
    return out


def test_release_manifest_has_sets_identities_and_the_release_landmarks(tmp_path):
    spec = {"kind": "rfw", "root": str(RFW)}
    m = build_manifest(spec, tmp_path, tmp_path / "manifest.parquet")
    assert len(m) == 48 and (m["status"] == "ok").all()
    assert m.groupby("label_rfw_set").size().to_dict() == {s: 12 for s in RFW_SETS}
    row = m[m["path"] == "data/Asian/m.0as02x/m.0as02x_0003.jpg"].iloc[0]
    assert row["identity"] == "m.0as02x" and row["label_rfw_set"] == "Asian"
    # the five points of _lmk.txt (fields 2..11: x before y) become the given landmarks
    want = _lmk("Asian")["data/Asian/m.0as02x/m.0as02x_0003.jpg"]
    assert np.allclose(row["given_landmarks"], want)
    assert want[0] < want[2]  # first point = left eye as seen in the image


def test_protocol_per_set_in_file_order_with_insightface_folds(tmp_path):
    spec = {"kind": "rfw", "root": str(RFW)}
    build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    assert implied_protocols(spec) == [*RFW_SETS, "rfw"]
    p = write_set_protocol(spec, "Caucasian", tmp_path / "m.parquet", tmp_path / "c.parquet")
    lines = rfw_files(RFW, "Caucasian")["pairs"].read_text().splitlines()
    assert len(p) == len(lines) == 20 and (p["status"] == "ok").all()
    # RFW's layout: per fold the genuine lines, then the impostor lines
    assert p["label"].tolist() == [1 if len(x.split("\t")) == 3 else 0 for x in lines]
    assert p["fold"].tolist() == default_folds(20, 10).tolist()
    assert p.groupby("fold")["label"].agg(list).tolist() == [[1, 0]] * 10
    a, n1, n2 = lines[0].split("\t")
    assert p["image_a"].iat[0] == f"data/Caucasian/{a}/{a}_{int(n1):04d}.jpg"
    assert p["image_b"].iat[0] == f"data/Caucasian/{a}/{a}_{int(n2):04d}.jpg"
    every = write_set_protocol(spec, "rfw", tmp_path / "m.parquet", tmp_path / "r.parquet")
    assert len(every) == 80 and every.groupby("label_rfw_set").size().tolist() == [20] * 4


def _write_bins(folder: Path) -> dict[str, str]:
    """The release as insightface .bin files: each pair's two images, in file order."""
    bins = {}
    for s in RFW_SETS:
        pairs = read_rfw_pairs(rfw_files(RFW, s)["pairs"], s)
        images = [(RFW / p).read_bytes() for a, b in zip(pairs["path_a"], pairs["path_b"],
                                                         strict=True) for p in (a, b)]
        bins[s] = str(folder / f"{s}_test.bin")
        write_bin(bins[s], images, pairs["label"].astype(bool).tolist())
    return bins


def test_bin_form_gives_the_same_protocols_and_attribute(tmp_path):
    bins = _write_bins(tmp_path)
    spec = {"kind": "rfw", "bins": bins}
    assert config_errors({"datasets": {"r": spec}}) == []
    m = build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    assert len(m) == 160 and m.groupby("label_rfw_set").size().tolist() == [40] * 4
    assert m["path"].iat[0] == "African_test.bin#0" and m["identity"].iat[0] == "African/p0"
    build_manifest({"kind": "rfw", "root": str(RFW)}, tmp_path, tmp_path / "f.parquet")
    for s in RFW_SETS:
        b = write_set_protocol(spec, s, tmp_path / "m.parquet", tmp_path / f"b{s}.parquet")
        f = write_set_protocol({"kind": "rfw", "root": str(RFW)}, s, tmp_path / "f.parquet",
                               tmp_path / f"f{s}.parquet")
        assert b["fold"].tolist() == f["fold"].tolist()
        assert b["label"].tolist() == f["label"].tolist()
        assert (b["label_rfw_set"] == s).all() and (b["status"] == "ok").all()


def test_bad_lines_lose_nothing(tmp_path, caplog):
    root = shutil.copytree(RFW, tmp_path / "rfw")
    pairs = rfw_files(root, "Indian")["pairs"]
    lines = pairs.read_text().splitlines()
    lines[3] = "m.0in00x\tone\ttwo"                 # malformed
    lines[4] = "m.0in01x\t1\t9"                      # names an image that does not exist
    pairs.write_text("\n".join(lines) + "\n")
    images = rfw_files(root, "Indian")["images"]
    images.write_text(images.read_text() + "m.0in03x_0007.jpg\t3\nnot a line at all\n")
    lmk = rfw_files(root, "Indian")["lmk"]
    lmk_lines = lmk.read_text().splitlines()
    lmk.write_text("\n".join(["broken"] + lmk_lines[1:]) + "\n")
    m = build_manifest({"kind": "rfw", "root": str(root)}, tmp_path, tmp_path / "m.parquet")
    extra = m[m["path"] == "data/Indian/m.0in03x/m.0in03x_0007.jpg"]
    assert extra["status"].tolist() == ["missing"]   # listed, not on disk: a row all the same
    first = m[m["path"] == "data/Indian/m.0in00x/m.0in00x_0001.jpg"].iloc[0]
    assert first["status"] == "ok" and first["given_landmarks"] is None
    assert "unreadable lines" in caplog.text
    p = write_set_protocol({"kind": "rfw", "root": str(root)}, "Indian",
                           tmp_path / "m.parquet", tmp_path / "p.parquet")
    assert len(p) == 20                              # every line is a row
    assert p["status"].iat[3] == "malformed" and "Indian_pairs.txt:4" in p["message"].iat[3]
    assert p["status"].iat[4] == "not_in_manifest"
    assert (p["status"] == "ok").sum() == 18
    # evaluation counts them as skipped, with their statuses
    scored = p.assign(score=np.where(p["label"] == 1, 0.8, 0.2))
    scored.loc[p["status"] != "ok", "score"] = np.nan
    row = write_evaluation(scored, tmp_path / "p.parquet", tmp_path / "s.parquet",
                           tmp_path / "out", model="m", benchmark="Indian")
    assert row["n_skipped"] == 2 and "malformed: 1" in row["skipped_statuses"]
    assert "not_in_manifest: 1" in row["skipped_statuses"]


def test_config_errors_name_the_key(tmp_path):
    def errors(spec):
        return config_errors({"datasets": {"r": spec}})

    assert any(e.startswith("datasets.r.root:") for e in errors({"kind": "rfw"}))
    assert any(e.startswith("datasets.r.root:") and "does not exist" in e
               for e in errors({"kind": "rfw", "root": str(tmp_path / "nope")}))
    assert any(e.startswith("datasets.r.sets[0]: unknown RFW set 'Martian'")
               for e in errors({"kind": "rfw", "root": str(RFW), "sets": ["Martian"]}))
    root = shutil.copytree(RFW, tmp_path / "rfw")
    rfw_files(root, "Asian")["pairs"].unlink()
    assert any("RFW set Asian has no pairs file" in e and e.startswith("datasets.r.root:")
               for e in errors({"kind": "rfw", "root": str(root)}))
    assert errors({"kind": "rfw", "root": str(root), "sets": ["African", "Indian"]}) == []
    assert any(e.startswith("datasets.r.bins.African:")
               for e in errors({"kind": "rfw", "bins": {"African": str(tmp_path / "x.bin")}}))
    with pytest.raises(DatasetError, match="Asian_pairs.txt does not exist"):
        build_manifest({"kind": "rfw", "root": str(root)}, tmp_path, tmp_path / "m.parquet")


def _metrics(tmp_path: Path, model: str, s: str, acc: float, std: float = 0.01) -> dict:
    path = tmp_path / f"{model}_{s}.parquet"
    write_parquet(pd.DataFrame([{"model": model, "benchmark": s, "accuracy": acc,
                                 "accuracy_std": std, "n_pairs": 6000, "n_skipped": 0,
                                 "skipped_statuses": ""}]), path)
    return {"model": model, "set": s, "path": str(path)}


def test_table_average_std_across_sets_and_ser(tmp_path):
    accs = {"African": 0.90, "Asian": 0.92, "Caucasian": 0.96, "Indian": 0.94}
    entries = [_metrics(tmp_path, "a", s, v) for s, v in accs.items()]
    entries += [_metrics(tmp_path, "b", s, 1.0 if s == "Caucasian" else 0.95) for s in accs]
    t = write_rfw_table(entries, ["a", "b"], list(accs), tmp_path / "t.parquet",
                        tmp_path / "t.md", tmp_path / "t.html", ds="rfw")
    avg = t[(t["model"] == "a") & (t["set"] == "average")].iloc[0]
    v = np.array(list(accs.values()))
    assert avg["accuracy"] == pytest.approx(v.mean())
    assert avg["std_across_sets"] == pytest.approx(np.sqrt(((v - v.mean()) ** 2).mean()))
    assert avg["ser"] == pytest.approx(0.10 / 0.04) and avg["status"] == "ok"
    b = t[(t["model"] == "b") & (t["set"] == "average")].iloc[0]
    assert np.isnan(b["ser"]) and b["status"].startswith("n/a (SER: no error on Caucasian")
    md = (tmp_path / "t.md").read_text()
    assert "| a | 90.00 ± 1.00 | 92.00 ± 1.00 | 96.00 ± 1.00 | 94.00 ± 1.00 | 93.00 |" in md
    assert "<table>" in (tmp_path / "t.html").read_text()
    # a set without metrics: the average says which
    row = average_row("c", [{"set": "African", "accuracy": np.nan, "n_pairs": 0,
                             "n_skipped": 9}, {"set": "Asian", "accuracy": 0.9,
                                                "n_pairs": 9, "n_skipped": 0}])
    assert np.isnan(row["accuracy"]) and row["status"] == "n/a (no accuracy on African)"


def test_set_accuracy_is_insightface_ten_fold_rule(tmp_path):
    spec = {"kind": "rfw", "root": str(RFW)}
    build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    p = write_set_protocol(spec, "African", tmp_path / "m.parquet", tmp_path / "a.parquet")
    rng = np.random.default_rng(3)
    scores = np.where(p["label"] == 1, 0.5, 0.1) + rng.normal(0, 0.25, len(p))
    row = write_evaluation(p.assign(score=scores), tmp_path / "a.parquet",
                           tmp_path / "s.parquet", tmp_path / "o", model="m",
                           benchmark="African")
    k = kfold_accuracy(scores, p["label"].to_numpy(), default_folds(len(p), 10))
    assert row["accuracy"] == pytest.approx(k.mean) and row["accuracy_std"] == pytest.approx(k.std)
    assert read_parquet(tmp_path / "s.parquet")["eval_fold"].tolist() == p["fold"].tolist()


def test_dag_side_sets_are_evaluated_and_rfw_is_assessed():
    """Pure functions of the resolved config: every set and `rfw` is evaluated, the table
    reads the sets, the later stages assess `rfw` with the set as the protected group."""
    from facecast.config.prepare import resolve_config
    from facecast.config.schema import SCHEMA
    from facecast.evaluate import targets as ev
    from facecast.fairness import targets as fa

    config = {"datasets": {"r": {"kind": "rfw", "root": str(RFW)}},
              "embed": {"models": {"lbp": {"backend": "lbp"}}}}
    plan = resolve_config(config, str(Path(__file__).resolve().parents[1] / SCHEMA))
    assert config["fairness"]["protected"] == {"rfw_set": {"column": "label_rfw_set"}}
    assert "benchmarks" not in config or not config["benchmarks"]  # nothing mined
    assert any("dataset r (RFW) implies protocols African, Asian, Caucasian, Indian, rfw"
               in line for line in plan)
    assert ev.eval_benchmarks(config, "r") == [*RFW_SETS, "rfw"]
    assert len(ev.metric_files(config, "r")) == 5
    assert [it["set"] for it in ev.rfw_items(config, "r")] == list(RFW_SETS)
    assert ev.rfw_targets(config, "r") == ["results/r/eval/rfw.md", "results/r/eval/rfw.html"]
    assert fa.protocols(config) == ["rfw"]
    assert fa.targets(config, "r", ["r"]) == ["results/r/fairness/lbp/rfw/report.md",
                                              "results/r/fairness/leaderboard/rfw/leaderboard.md"]
    assert ev.protocol_path(config, "r", "Asian") == "results/r/protocols/Asian.parquet"
