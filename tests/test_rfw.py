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
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet

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
    assert row["identity"] == "Asian/m.0as02x" and row["label_rfw_set"] == "Asian"
    assert m["identity"].str.split("/").str[0].tolist() == m["label_rfw_set"].tolist()
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
    # the sets in the RFW paper's order: Caucasian's file first
    assert m["path"].iat[0] == "Caucasian_test.bin#0"
    assert m["identity"].iat[0] == "Caucasian/p0"
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
    assert row["n_skipped"] == 1 and row["skipped_statuses"] == "malformed: 1"
    # an image that is not there is a pair without a feature (evaluate.failed: nonmatch)
    assert row["n_failed"] == 1 and row["failed_statuses"] == "not_in_manifest: 1"
    assert row["n_pairs"] == 19
    # the malformed line breaks fold 1's structure: the protocol's fold note says so
    note = read_provenance(tmp_path / "p.parquet")["folds"]
    assert note.endswith("pairs file structure: not RFW's layout (blocks not half genuine: "
                         "fold 1 (1 genuine, 0 impostor); 1 malformed line(s)): 20 lines, "
                         "10 genuine and 9 impostor; the folds stay insightface's "
                         "consecutive blocks (10 blocks of 2 lines)")


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


def _metrics(tmp_path: Path, model: str, s: str, acc: float, std: float = 0.01,
             n_failed: int = 3) -> dict:
    path = tmp_path / f"{model}_{s}.parquet"
    write_parquet(pd.DataFrame([{"model": model, "benchmark": s, "accuracy": acc,
                                 "accuracy_std": std, "n_pairs": 6000, "n_skipped": 0,
                                 "n_genuine": 3000 if s != "African" else 2000,
                                 "n_impostor": 3000 if s != "African" else 4000,
                                 "skipped_statuses": "", "n_failed": n_failed,
                                 "failed": "nonmatch",
                                 "folds": f"RFW ...; pairs file structure: {s} as found"}]),
                  path)
    return {"model": model, "set": s, "path": str(path)}


def _cells(md: str, model: str) -> list[str]:
    """The cells of the papers' table row of ``model``."""
    line = next(x for x in md.splitlines() if x.startswith(f"| {model} | "))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_table_average_std_across_sets_and_ser(tmp_path):
    """The papers' table cell by cell: accuracy ± fold std per set in the RFW paper's
    order, Avg, STD (population std of the four accuracies), SER to three decimals."""
    accs = {"Caucasian": 0.96, "Indian": 0.94, "Asian": 0.92, "African": 0.89}
    stds = {"Caucasian": 0.005, "Indian": 0.01, "Asian": 0.015, "African": 0.02}
    assert list(accs) == list(RFW_SETS)
    entries = [_metrics(tmp_path, "a", s, v, stds[s]) for s, v in accs.items()]
    entries += [_metrics(tmp_path, "b", s, 1.0 if s == "Caucasian" else 0.95) for s in accs]
    t = write_rfw_table(entries, ["a", "b"], list(accs), tmp_path / "t.parquet",
                        tmp_path / "t.md", tmp_path / "t.html", ds="rfw")
    avg = t[(t["model"] == "a") & (t["set"] == "average")].iloc[0]
    v = np.array(list(accs.values()))
    assert avg["accuracy"] == pytest.approx(0.9275)
    assert avg["std_across_sets"] == pytest.approx(np.sqrt(0.00066875))
    assert avg["ser"] == pytest.approx(0.11 / 0.04) and avg["status"] == "ok"
    assert avg["n_pairs"] == 24000 and avg["n_failed"] == 12 and avg["failed"] == "nonmatch"
    b = t[(t["model"] == "b") & (t["set"] == "average")].iloc[0]
    assert np.isnan(b["ser"]) and b["status"].startswith("n/a (SER: no error on Caucasian")
    md = (tmp_path / "t.md").read_text()
    assert "| model | Caucasian | Indian | Asian | African | Avg | STD | SER |" in md
    assert _cells(md, "a") == ["96.00 ± 0.50", "94.00 ± 1.00", "92.00 ± 1.50",
                               "89.00 ± 2.00", "92.75", "2.59", "2.750"]
    assert _cells(md, "b")[:6] == ["100.00 ± 1.00", "95.00 ± 1.00", "95.00 ± 1.00",
                                   "95.00 ± 1.00", "96.25", "2.17"]
    assert _cells(md, "b")[6] == "n/a (SER: no error on Caucasian, the smallest error is 0)"
    assert v.std() == pytest.approx(0.0258602, abs=1e-7)
    assert "| a | average | 24000 | 11000 | 13000 | 54.17 | 12 | 0 | – | ok |" in md
    assert "| a | Indian | 6000 | 3000 | 3000 | 50.00 | 3 | 0 | – | ok |" in md
    assert "| a | African | 6000 | 2000 | 4000 | 66.67 | 3 | 0 | – | ok |" in md
    assert avg["chance_accuracy"] == pytest.approx(13000 / 24000)
    assert "24 pair(s) without a feature: pairs without a feature count as non-matches" in md
    assert "Wang et al., ICCV 2019" in md and "Wang & Deng" in md and "FairCal" not in md
    assert t.loc[t["set"] == "Asian", "structure"].tolist() == ["Asian as found"] * 2
    assert "<table>" in (tmp_path / "t.html").read_text()
    # a set without metrics: the average says which
    row = average_row("c", [{"set": "African", "accuracy": np.nan, "n_pairs": 0,
                             "n_skipped": 9}, {"set": "Asian", "accuracy": 0.9,
                                                "n_pairs": 9, "n_skipped": 0}])
    assert np.isnan(row["accuracy"]) and row["status"] == "n/a (no accuracy on African)"


def _failed_run(tmp_path: Path, rule: str) -> pd.DataFrame:
    """Indian's 20 pairs (10 folds of 1 genuine + 1 impostor), scored perfectly apart
    (genuine 0.8, impostor 0.2), but the genuine pairs of folds 0 and 1 and the impostor
    of fold 2 without a feature (no face); evaluated and tabled under ``rule``."""
    spec = {"kind": "rfw", "root": str(RFW), "sets": ["Indian"]}
    build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    p = write_set_protocol(spec, "Indian", tmp_path / "m.parquet", tmp_path / "p.parquet")
    scored = p.assign(score=np.where(p["label"] == 1, 0.8, 0.2))
    lost = ((p["fold"].isin(["0", "1"])) & (p["label"] == 1)) | \
        ((p["fold"] == "2") & (p["label"] == 0))
    scored.loc[lost, "score"] = np.nan
    scored.loc[lost, ["status", "message"]] = ["no_face", "no face found"]
    out = tmp_path / rule
    write_evaluation(scored, tmp_path / "p.parquet", out / "s.parquet", out / "e", model="m",
                     benchmark="Indian", cfg={"failed": rule})
    entries = [{"model": "m", "set": "Indian", "path": str(out / "e" / "metrics.parquet")}]
    return write_rfw_table(entries, ["m"], ["Indian"], out / "t.parquet", out / "t.md",
                           out / "t.html", ds="rfw")


def test_table_failed_pairs_nonmatch_against_drop(tmp_path):
    """The issue's example shape, by hand. nonmatch: all 20 pairs count; a genuine pair
    without a feature is a false non-match, an impostor one a correct reject: folds 0 and
    1 get 1 of 2 right, the others 2 of 2 -> 90 % ± 20 % (population std of eight 1.0 and
    two 0.5). drop: the 3 pairs are left out, the other 17 are all right -> 100 % ± 0."""
    non = _failed_run(tmp_path, "nonmatch").set_index("set")
    drop = _failed_run(tmp_path, "drop").set_index("set")
    assert non.loc["Indian", "accuracy"] == pytest.approx(0.9)
    assert non.loc["Indian", "accuracy_std"] == pytest.approx(0.2)
    assert (non.loc["Indian", "n_pairs"], non.loc["Indian", "n_failed"]) == (20, 3)
    assert drop.loc["Indian", "accuracy"] == 1.0 and drop.loc["Indian", "accuracy_std"] == 0
    assert (drop.loc["Indian", "n_pairs"], drop.loc["Indian", "n_failed"]) == (17, 3)
    assert drop.loc["Indian", "n_skipped"] == 3
    assert non.loc["average", "ser"] == 1.0 and np.isnan(drop.loc["average", "ser"])
    md_non = (tmp_path / "nonmatch" / "t.md").read_text()
    md_drop = (tmp_path / "drop" / "t.md").read_text()
    assert _cells(md_non, "m") == ["90.00 ± 20.00", "90.00", "0.00", "1.000"]
    assert _cells(md_drop, "m")[:3] == ["100.00 ± 0.00", "100.00", "0.00"]
    assert "3 pair(s) without a feature: pairs without a feature count as non-matches " \
        "(evaluate.failed: nonmatch" in md_non
    assert "3 pair(s) without a feature: pairs without a feature are left out " \
        "(evaluate.failed: drop)" in md_drop
    assert "| m | Indian | 20 | 10 | 10 | 50.00 | 3 | 0 | – | ok |" in md_non
    assert "| m | Indian | 17 | 8 | 9 | 52.94 | 3 | 3 | no_face: 3 | ok |" in md_drop


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
    assert any("dataset r (RFW) implies protocols Caucasian, Indian, Asian, African, rfw"
               in line for line in plan)
    assert ("datasets.r: RFW pairs files of Caucasian, Indian, Asian, African in RFW's "
            "layout (10 consecutive blocks of 2 lines, each 1 genuine then 1 impostor "
            "lines)") in plan
    assert ev.eval_benchmarks(config, "r") == [*RFW_SETS, "rfw"]
    assert len(ev.metric_files(config, "r")) == 5
    assert [it["set"] for it in ev.rfw_items(config, "r")] == list(RFW_SETS)
    assert ev.rfw_targets(config, "r") == ["results/r/eval/rfw.md", "results/r/eval/rfw.html"]
    assert fa.protocols(config) == ["rfw"]
    assert fa.targets(config, "r", ["r"]) == ["results/r/fairness/lbp/rfw/report.md",
                                              "results/r/fairness/leaderboard/rfw/leaderboard.md"]
    assert ev.protocol_path(config, "r", "Asian") == "results/r/protocols/Asian.parquet"


VARIANTS = TEST_DATA / "rfw_variants"


def test_variants_png_upper_case_jpg_lower_case_folders_and_a_person_in_two_sets(tmp_path):
    """tests/data/rfw_variants: set folders and txt files in lower case, .png images (and
    .JPG ones) named .jpg by the pairs and images files, and person m.0dup00 in Caucasian
    and in African: two identities, so the per-identity vote keeps every image's set."""
    from facecast.fairness.groups import majority_vote

    spec = {"kind": "rfw", "root": str(VARIANTS), "sets": ["African", "Caucasian"]}
    assert config_errors({"datasets": {"r": spec}}) == []
    m = build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    assert (m["status"] == "ok").all() and len(m) == 8     # the listed .jpg names are these
    assert sorted(m["path"]) == sorted(
        [f"data/african/{p}/{p}_000{n}.png" for p in ("m.0af00x", "m.0dup00") for n in (1, 2)]
        + [f"data/caucasian/m.0ca00x/m.0ca00x_000{n}.png" for n in (1, 2)]
        + [f"data/caucasian/m.0dup00/m.0dup00_000{n}.JPG" for n in (1, 2)])
    by = m.set_index("path")
    assert by.loc["data/caucasian/m.0dup00/m.0dup00_0001.JPG", "identity"] == \
        "Caucasian/m.0dup00"
    assert by.loc["data/african/m.0dup00/m.0dup00_0001.png", "identity"] == "African/m.0dup00"
    assert m.groupby("label_rfw_set").size().to_dict() == {"African": 4, "Caucasian": 4}
    assert majority_vote(m["label_rfw_set"], m["identity"]).tolist() == \
        m["label_rfw_set"].tolist()
    bare = m["identity"].str.split("/").str[1]            # the bare id merges the two people
    assert (majority_vote(m["label_rfw_set"], bare) != m["label_rfw_set"]).sum() == 2
    c = write_set_protocol(spec, "Caucasian", tmp_path / "m.parquet", tmp_path / "c.parquet")
    assert len(c) == 20 and (c["status"] == "ok").all()
    assert c["image_b"].iat[0].endswith("m.0ca00x_0002.png")
    assert c["image_a"].iat[1].endswith("m.0dup00_0001.JPG")
    assert c["identity_b"].iat[10] == "Caucasian/m.0dup00"
    a = write_set_protocol(spec, "African", tmp_path / "m.parquet", tmp_path / "a.parquet")
    assert len(a) == 19 and (a["status"] == "ok").all()
    assert a["fold"].tolist() == default_folds(19, 10).tolist()   # insightface's blocks
    # the structure found: in the plan, the protocol's fold note and the table
    sorted_text = ("not RFW's layout (every genuine line comes before every impostor line "
                   "(a file sorted by label?), so blocks are not half genuine: fold 0 (2 "
                   "genuine, 0 impostor), fold 1 (2 genuine, 0 impostor), fold 2 (2 genuine, "
                   "0 impostor), fold 3 (2 genuine, 0 impostor), fold 4 (2 genuine, 0 "
                   "impostor) and 5 more): 20 lines, 10 genuine and 10 impostor; the folds "
                   "stay insightface's consecutive blocks (10 blocks of 2 lines)")
    short_text = ("not RFW's layout (19 lines do not split into 10 equal blocks; blocks not "
                  "half genuine: fold 9 (1 genuine, 0 impostor)): 19 lines, 10 genuine and 9 "
                  "impostor; the folds stay insightface's consecutive blocks (9 blocks of 2 "
                  "lines, then 1 of 1)")
    from facecast.datasets.set_checks import rfw_plan

    assert rfw_plan({"datasets": {"r": spec}}) == [
        f"datasets.r: RFW Caucasian pairs file {sorted_text}",
        f"datasets.r: RFW African pairs file {short_text}"]
    assert read_provenance(tmp_path / "c.parquet")["structure"] == {"Caucasian": sorted_text}
    assert read_provenance(tmp_path / "a.parquet")["folds"].endswith(short_text)
    scores = np.where(a["label"] == 1, 0.7, 0.1)
    write_evaluation(a.assign(score=scores), tmp_path / "a.parquet", tmp_path / "s.parquet",
                     tmp_path / "e", model="m", benchmark="African")
    t = write_rfw_table([{"model": "m", "set": "African",
                          "path": str(tmp_path / "e" / "metrics.parquet")}], ["m"],
                        ["African"], tmp_path / "t.parquet", tmp_path / "t.md",
                        tmp_path / "t.html", ds="v")
    assert t["structure"].iat[0] == short_text
    assert f"- African: {short_text}" in (tmp_path / "t.md").read_text()


def test_fold_structure_says_what_differs_from_rfws_layout():
    """RFW's 6,000 lines: 10 blocks of 300 genuine then 300 impostor lines; what a file
    that differs gets said (the folds stay insightface's consecutive blocks)."""
    from facecast.datasets.rfw import fold_structure

    rfw = np.tile(np.r_[np.ones(300, int), np.zeros(300, int)], 10)
    assert fold_structure(rfw) == (True, "RFW's layout: 10 consecutive blocks of 600 lines, "
                                         "each 300 genuine then 300 impostor lines")
    ok, text = fold_structure(rfw[:-1])                     # 5,999 lines
    assert not ok and text == (
        "not RFW's layout (5,999 lines do not split into 10 equal blocks; blocks not half "
        "genuine: fold 9 (300 genuine, 299 impostor)): 5,999 lines, 3,000 genuine and 2,999 "
        "impostor; the folds stay insightface's consecutive blocks (9 blocks of 600 lines, "
        "then 1 of 599)")
    swapped = rfw.copy()
    swapped[[2000, 2200]] = swapped[[2200, 2000]]           # fold 3: one impostor early
    assert fold_structure(swapped)[1].startswith(
        "not RFW's layout (blocks whose genuine lines do not all come before their impostor "
        "lines (a re-sorted file?): folds 3): 6,000 lines")
    uneven = rfw.copy()
    uneven[4500:4510] = 1                                   # fold 7: 310 genuine, 290 impostor
    assert fold_structure(uneven)[1].startswith(
        "not RFW's layout (blocks not half genuine: fold 7 (310 genuine, 290 impostor)): "
        "6,000 lines, 3,010 genuine and 2,990 impostor")
    by_label = np.sort(rfw)[::-1]
    assert "every genuine line comes before every impostor line" in fold_structure(by_label)[1]
    assert fold_structure([1, 0, 1, -1, 1, 0, 1, 0], 2) == (False, (
        "not RFW's layout (blocks not half genuine: fold 0 (2 genuine, 1 impostor); blocks "
        "whose genuine lines do not all come before their impostor lines (a re-sorted "
        "file?): folds 0, 1; 1 malformed line(s)): 8 lines, 4 genuine and 3 impostor; the "
        "folds stay insightface's consecutive blocks (2 blocks of 4 lines)"))
