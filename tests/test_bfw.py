"""BFW (issue 41): the datatable (tests/data/bfw, BFW's layout, with pandas' index column)
as one dataset and one protocol, its score columns as models without images, the
per-subgroup threshold table, and bad rows that lose nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import yaml
from conftest import REPO, TEST_DATA

from facecast.attributes.stage import write_manifest_attributes
from facecast.config.fair_sets import BFW_COLUMNS, score_columns
from facecast.datasets.checks import config_errors
from facecast.datasets.stage import build_manifest
from facecast.evaluate.resolve import attach_manifest
from facecast.evaluate.set_protocols import given_scores
from facecast.evaluate.stage import evaluate_given_scores, write_set_protocol
from facecast.fairness.bfw_table import write_bfw_table
from facecast.fairness.group_thresholds import group_threshold_table
from facecast.io.parquet_io import read_parquet

BFW = TEST_DATA / "bfw"
TABLE = BFW / "bfw-v0.1.5-datatable.csv"
MODELS = ["vgg16", "resnet50", "senet50", "sphereface"]


def _spec(table=TABLE, root=BFW) -> dict:
    return {"kind": "bfw", "table": str(table), **({"root": str(root)} if root else {})}


def test_manifest_from_the_datatable(tmp_path):
    m = build_manifest(_spec(), tmp_path, tmp_path / "m.parquet")
    csv = pd.read_csv(TABLE, index_col=0)
    assert len(m) == len(set(csv["p1"]) | set(csv["p2"])) == 96
    assert (m["status"] == "ok").all()  # every image is under the root
    row = m[m["path"] == "white_males/n000032/0003_01.jpg"].iloc[0]
    assert (row["label_bfw_subgroup"], row["label_bfw_gender"], row["label_bfw_ethnicity"]) \
        == ("WM", "M", "W")
    assert row["identity"] == str(csv.loc[csv["p2"] == row["path"], "id2"].iloc[0])
    # without the images (score models only): the same rows, no file is looked at
    m2 = build_manifest(_spec(root=None), tmp_path, tmp_path / "m2.parquet")
    assert m2["image_id"].tolist() == m["image_id"].tolist()


def test_protocol_and_score_models_with_or_without_the_index_column(tmp_path):
    assert score_columns(_spec()) == MODELS  # every numeric column that is not BFW's own
    build_manifest(_spec(), tmp_path, tmp_path / "m.parquet")
    p = write_set_protocol(_spec(), "bfw", tmp_path / "m.parquet", tmp_path / "p.parquet")
    csv = pd.read_csv(TABLE, index_col=0)
    assert len(p) == len(csv) and (p["status"] == "ok").all()
    assert p["fold"].tolist() == csv["fold"].astype(str).tolist()
    assert p["label"].tolist() == csv["label"].tolist()
    assert p["identity_a"].tolist() == csv["id1"].astype(str).tolist()
    s = given_scores(tmp_path / "p.parquet", "senet50")
    assert np.array_equal(s["score"].to_numpy(), csv["senet50"].to_numpy())
    assert "given_score__vgg16" not in s
    plain = tmp_path / "plain.csv"
    csv.to_csv(plain, index=False)
    q = write_set_protocol(_spec(plain), "bfw", tmp_path / "m.parquet", tmp_path / "q.parquet")
    assert q.drop(columns="line").equals(p.drop(columns="line"))


def test_bad_rows_lose_nothing_and_are_counted(tmp_path):
    root = shutil.copytree(BFW, tmp_path / "bfw")
    csv = pd.read_csv(TABLE, index_col=0)
    csv["vgg16"] = csv["vgg16"].astype(object)
    csv.loc[0, "p1"] = None                     # a row without a path
    csv.loc[1, "vgg16"] = "oops"                 # a score that is not a number
    csv.loc[2, "label"] = 2                      # a label that is not 0 or 1
    csv.loc[3, "vgg16"] = None                   # an empty score
    gone = csv.loc[200, "p2"]
    (root / gone).unlink()                       # an image that is not there
    table = root / "table.csv"
    csv.to_csv(table)
    spec = _spec(table, root)
    build_manifest(spec, tmp_path, tmp_path / "m.parquet")
    p = write_set_protocol(spec, "bfw", tmp_path / "m.parquet", tmp_path / "p.parquet")
    assert len(p) == len(csv)
    assert p["status"].iloc[:3].tolist() == ["no_path", "ok", "bad_label"]
    assert "datatable line 2: p1 or p2 is empty" in p["message"].iat[0]
    assert p["status"].iat[200] == "missing" and p["image_b"].iat[200] == gone
    assert p["message"].iat[200] == "image_a: ok; image_b: missing"
    row = evaluate_given_scores(tmp_path / "p.parquet", tmp_path / "s.parquet",
                                tmp_path / "e", model="vgg16", benchmark="bfw")
    s = read_parquet(tmp_path / "s.parquet")
    assert s["status"].iat[1] == "bad_score" and "vgg16: score is not a number" in \
        s["message"].iat[1] and "line 3" in s["message"].iat[1]
    assert s["status"].iat[3] == "bad_score" and "score missing" in s["message"].iat[3]
    n_missing = int((p["status"] == "missing").sum())  # every pair of the lost image
    # evaluate.failed: nonmatch (the default): a pair without a score or an image counts
    # as a non-match; only the bad label is left out
    assert n_missing >= 2 and row["n_failed"] == 3 + n_missing and row["n_skipped"] == 1
    assert row["n_pairs"] == len(csv) - row["n_skipped"]
    assert "bad_score: 2" in row["failed_statuses"]
    assert f"missing: {n_missing}" in row["failed_statuses"]
    other = evaluate_given_scores(tmp_path / "p.parquet", tmp_path / "r.parquet",
                                  tmp_path / "r", model="resnet50", benchmark="bfw")
    assert other["n_failed"] == 1 + n_missing  # vgg16's bad cells do not touch resnet50


def test_config_errors_name_the_key(tmp_path):
    def errors(spec, embed=None):
        return config_errors({"datasets": {"b": spec}, "embed": {"models": embed or {}}})

    assert errors(_spec(root=None)) == []
    assert any(e.startswith("datasets.b.table: dataset kind bfw needs its datatable")
               for e in errors({"kind": "bfw"}))
    assert any(e.startswith("datasets.b.table:") and "does not exist" in e
               for e in errors(_spec(tmp_path / "none.csv", root=None)))
    csv = pd.read_csv(TABLE, index_col=0)
    short = tmp_path / "short.csv"
    csv.drop(columns=["e2", "g1"]).to_csv(short)
    assert any(e.startswith("datasets.b.table:") and "no column(s) g1, e2" in e
               for e in errors(_spec(short, root=None)))
    assert any(e.startswith("datasets.b.scores[1]: 'arcface' is not a column")
               for e in errors({**_spec(root=None), "scores": ["vgg16", "arcface"]}))
    assert any(e.startswith("datasets.b.root: embed.models run on BFW's images")
               for e in errors(_spec(root=None), embed={"dlib": {"backend": "dlib_resnet"}}))
    assert any(e.startswith("datasets.b.root:") and "does not exist" in e
               for e in errors(_spec(root=tmp_path / "nope")))
    assert set(BFW_COLUMNS) <= set(csv.columns)


def test_path_lookup_takes_a_paths_first_manifest_row():
    """The shared lookup (every protocol importer and BFW's million-row table): a path
    listed twice in the manifest (its second row ``duplicate``) resolves to its first row,
    as a plain per-pair dictionary lookup does."""
    man = pd.DataFrame({"image_id": ["a/1.jpg", "a/2.jpg", "b/1.jpg", "b/1.jpg//dup1"],
                        "path": ["a/1.jpg", "a/2.jpg", "b/1.jpg", "b/1.jpg"],
                        "identity": ["A", "A", "B", "B"],
                        "status": ["ok", "missing", "ok", "duplicate"]})
    raw = pd.DataFrame({"fold": ["1", "1", "2", "2"], "label": [0, 1, 0, 0],
                        "path_a": ["a/1.jpg", "a/2.jpg", "/b/1.jpg", "zz/9.jpg"],
                        "path_b": ["b/1.jpg", "a/1.jpg", "a/1.jpg", ""]})
    got = attach_manifest(raw, man)
    assert got.equals(attach_manifest(raw, man.drop_duplicates("path")))
    assert got["status"].tolist() == ["ok", "missing", "ok", "not_in_manifest"]
    assert got["identity_a"].iat[3] == "zz" and got["image_a"].iat[2] == "b/1.jpg"
    first: dict = {}
    for row in man.itertuples():
        first.setdefault(row.path, row)
    for side in ("a", "b"):
        for k, path in enumerate(raw[f"path_{side}"].str.lstrip("/")):
            row = first.get(path)
            assert got[f"image_{side}"].iat[k] == (row.image_id if row else path)
            assert got[f"identity_{side}"].iat[k] == (row.identity if row else
                                                       path.rpartition("/")[0])
            state = row.status if row else "not_in_manifest"
            assert f"image_{side}: {state}" in got["message"].iat[k] or state == "ok"
    prefixed = raw.assign(path_a="data/" + raw["path_a"], path_b="data/" + raw["path_b"])
    assert attach_manifest(prefixed, man, strip_prefix="data/").equals(got)


def test_threshold_table_laid_out_as_bfw(tmp_path):
    build_manifest(_spec(root=None), tmp_path, tmp_path / "m.parquet")
    write_manifest_attributes(tmp_path / "m.parquet", tmp_path / "attributes.parquet")
    attrs = read_parquet(tmp_path / "attributes.parquet")
    assert attrs["label_bfw_subgroup"].nunique() == 8 and "yaw" not in attrs
    write_set_protocol(_spec(root=None), "bfw", tmp_path / "m.parquet",
                       tmp_path / "p.parquet")
    group = dict(zip(attrs["image_id"], attrs["label_bfw_subgroup"], strict=True))
    paths = {}
    for m in ("vgg16", "sphereface"):
        s = given_scores(tmp_path / "p.parquet", m)
        g = group_threshold_table(s["score"].to_numpy(), s["label"].to_numpy(),
                                  s["image_a"].map(group).to_numpy(), [0.1, 0.01],
                                  folds=s["fold"].to_numpy())
        paths[m] = tmp_path / f"{m}.parquet"
        g.to_parquet(paths[m])
    t = write_bfw_table(paths, tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html",
                        ds="bfw")
    assert len(t) == 2 * 2 * 8 and set(t["model"]) == {"vgg16", "sphereface"}
    md = (tmp_path / "t.md").read_text()
    assert "### Deviation (%) under the global threshold" in md
    assert "| intended FMR | AF | AM | BF | BM | IF | IM | WF | WM |" in md
    assert "| 0.01 | n/a (18 impostors) |" in md  # 18 impostors per subgroup: FMR 0.01 is
    # not resolvable
    row = t[(t["model"] == "vgg16") & (t["target_fmr"] == 0.1) & (t["group"] == "BM")].iloc[0]
    cell = f"{100 * row['deviation_global']:+.1f}"
    assert cell in md.split("## sphereface")[0]


def test_score_only_dag_schedules_no_image_job(tmp_path):
    """A BFW dataset without embed models: evaluate, fairness, demographics, the BFW table,
    slices and compare on the score columns; no faces, embed or scorer job (dry run)."""
    cfg = {"datasets": {"bfw": {"kind": "bfw", "table": str(TABLE)}},
           "embed": {"models": {}}, "fairness": {"thresholds": {"fmr_targets": [0.1]}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                          "--directory", str(tmp_path), "--configfile", str(tmp_path / "c.yaml"),
                          "-n", "--quiet", "rules"], capture_output=True, text=True, check=True)
    counts = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    assert counts["evaluate_scores"] == counts["fairness"] == counts["demographics"] == 4
    assert counts["slices"] == 4 and counts["compare"] == counts["bfw_table"] == 1
    assert counts["manifest_attributes"] == counts["set_protocol"] == 1
    assert not {"faces", "embed", "attributes_score", "attributes_merge", "faces_index",
                "embed_index", "evaluate_benchmark"} & set(counts)
    assert "fairness.protected: derived - bfw_subgroup from label_bfw_subgroup" in out.stderr
    assert ("datasets.bfw.scores: derived - score models vgg16, resnet50, senet50, "
            "sphereface; not models: '' (pandas' index column)") in out.stderr


# ---------------------------------------------------------------- issue 46.2


def test_tar_table_cell_by_cell(tmp_path):
    """BFW's TAR-at-FAR table: a row per subgroup and threshold (global above own), a
    column per intended FMR, Avg. the mean over subgroups; the cross-validated TARs and
    deviations printed too. Subgroups X (impostors 0.1..0.5, genuines 0.45, 0.95) and Y
    (0.6..1.0; 0.85, 0.75, 0.95), 5 impostors across them at 0.0, every pair in two
    identical folds. Same-subgroup global threshold at FMR 0.2: k = 4 of 20 -> just above
    0.8; X's own just above 0.4, Y's just above 0.9."""
    s = np.r_[[0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0], np.zeros(5),
              [0.45, 0.95], [0.85, 0.75, 0.95]]
    y = np.r_[np.zeros(15, bool), np.ones(5, bool)]
    g = np.array(["X"] * 5 + ["Y"] * 5 + [None] * 5 + ["X"] * 2 + ["Y"] * 3, dtype=object)
    s, y, g = np.r_[s, s], np.r_[y, y], np.r_[g, g]
    folds = np.repeat(["1", "2"], 20)
    t = group_threshold_table(s, y, g, [0.2, 0.01], folds=folds, global_mask=pd.notna(g))
    t.insert(2, "global_pairs", "same_group")
    t.to_parquet(tmp_path / "m.parquet")
    table = write_bfw_table({"m": tmp_path / "m.parquet"}, tmp_path / "t.parquet",
                            tmp_path / "t.md", tmp_path / "t.html", ds="bfw")
    assert {"tar_global", "tar_group", "tar_global_cv", "deviation_global_cv"} <= set(table)
    md = (tmp_path / "t.md").read_text()
    assert ("The global threshold is fitted on the impostor pairs within one subgroup "
            "(a1 == a2), as BFW's own code fits it (`demographics.global_pairs: "
            "same_group`): 20 impostor pairs.") in md
    tar = ["| subgroup | threshold | 0.2 | 0.01 |", "|---|---|---|---|",
           "| X | global | 0.500 | n/a (20 impostors) |",
           "| X | own | 1.000 | n/a (10 impostors) |",
           "| Y | global | 0.667 | n/a (20 impostors) |",
           "| Y | own | 0.333 | n/a (10 impostors) |",
           "| Avg. | global | 0.583 | n/a (a subgroup is n/a) |",
           "| Avg. | own | 0.667 | n/a (a subgroup is n/a) |"]
    inside, cv = md.split("cross-validated over the protocol's folds", 1)
    assert "\n".join(tar) in inside and "\n".join(tar) in cv  # identical folds: cv = in-sample
    assert "| 0.2 | 0.8000 | 0.4000 | 0.9000 |" in inside  # thresholds row (global, X, Y)
    assert ("| 0.01 | n/a (20 impostors) | n/a (10 impostors) | n/a (10 impostors) |"
            in inside)
    glob_cv = cv.split("### Deviation (%) under the global threshold, cross-validated", 1)[1]
    assert glob_cv.split("\n\n")[1].splitlines()[2] == "| 0.2 | -100.0 | +100.0 |"
    assert "| 0.01 | n/a (10 impostors) | n/a (10 impostors) |" in glob_cv
    html = (tmp_path / "t.html").read_text()
    assert "<td>Avg.</td>" in html and "0.583" in html


def _scores_csv(tmp_path, **extra):
    csv = pd.read_csv(TABLE, index_col=0)
    for k, v in extra.items():
        csv[k] = v
    path = tmp_path / "table.csv"
    csv.to_csv(path)
    return csv, path


def test_only_score_columns_become_models(tmp_path):
    from facecast.config.fair_sets import skipped_columns

    n = len(pd.read_csv(TABLE, index_col=0))
    late = np.full(n, np.nan)
    late[230] = 0.5  # empty in the sniffed rows, not in the file: a score column
    csv, path = _scores_csv(tmp_path, ids1=np.arange(n), ids2=np.arange(n) + 1,
                            subject_id=np.arange(n), empty=np.full(n, np.nan), late=late)
    spec = _spec(path, root=None)
    assert score_columns(spec) == MODELS + ["late"]
    assert skipped_columns(spec) == {
        "": "pandas' index column",
        "ids1": "an id, index, fold or label column by its name",
        "ids2": "an id, index, fold or label column by its name",
        "subject_id": "an id, index, fold or label column by its name",
        "empty": "empty in every row"}
    # an explicit list (or mapping) wins
    assert score_columns({**spec, "scores": ["ids1", "vgg16"]}) == ["ids1", "vgg16"]
    assert score_columns({**spec, "scores": {"senet50": {}}}) == ["senet50"]
    from facecast.datasets.set_checks import bfw_plan

    plan = bfw_plan({"datasets": {"b": spec}})
    assert plan[0].startswith("datasets.b.scores: derived - score models vgg16, resnet50, "
                              "senet50, sphereface, late; not models: ''")
    assert "'empty' (empty in every row)" in plan[0]


def test_a_distance_column_warns_and_higher_different_flips(tmp_path, caplog):
    from facecast.datasets.bfw import distance_warning

    assert distance_warning("d", np.array([0.2, 0.4, 0.9, np.nan]), np.array([1, 1, 0, 0])
                            ) == ("score column 'd' LOOKS LIKE A DISTANCE (genuine pairs' "
                                  "mean 0.3 < impostor pairs' mean 0.9): facecast reads higher "
                                  "= more alike, so every rate of this model is inverted. If "
                                  "lower means more alike, set datasets.<ds>.scores: {d: "
                                  "{higher: different}}")
    assert distance_warning("d", np.array([0.9, 0.2]), np.array([1, 0])) == ""
    csv, path = _scores_csv(tmp_path, dist=1 - pd.read_csv(TABLE, index_col=0)["vgg16"])
    build_manifest(_spec(path, root=None), tmp_path, tmp_path / "m.parquet")
    with caplog.at_level("WARNING"):
        write_set_protocol(_spec(path, root=None), "bfw", tmp_path / "m.parquet",
                           tmp_path / "p.parquet")
    assert sum("'dist' LOOKS LIKE A DISTANCE" in r.getMessage() for r in caplog.records) == 1
    assert not any("'vgg16'" in r.getMessage() for r in caplog.records)
    caplog.clear()
    spec = {**_spec(path, root=None), "scores": {"dist": {"higher": "different"},
                                                 "vgg16": {"higher": "same"}}}
    with caplog.at_level("WARNING"):
        write_set_protocol(spec, "bfw", tmp_path / "m.parquet", tmp_path / "q.parquet")
    assert not any("DISTANCE" in r.getMessage() for r in caplog.records)
    flipped = given_scores(tmp_path / "q.parquet", "dist")["score"].to_numpy()
    np.testing.assert_allclose(flipped, csv["vgg16"].to_numpy() - 1)
    from facecast.io.parquet_io import read_provenance

    prov = read_provenance(tmp_path / "q.parquet")
    assert prov["negated_score_models"] == ["dist"]
    assert prov["score_direction"] == {"dist": "ok", "vgg16": "ok"}


def test_a_pickled_datatable_is_a_config_error_and_never_unpickled(tmp_path):
    import pickle

    marker = tmp_path / "unpickled"

    class Trap:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    pkl = tmp_path / "bfw-v0.1.5-datatable.pkl"
    pkl.write_bytes(pickle.dumps(Trap()))
    errors = config_errors({"datasets": {"b": {"kind": "bfw", "table": str(pkl)}},
                            "embed": {"models": {}}})
    assert len(errors) == 1 and errors[0].startswith(f"datasets.b.table: {pkl} is a pickle")
    assert (f"pd.read_pickle('{pkl}').to_csv('{tmp_path / 'bfw-v0.1.5-datatable.csv'}', "
            "index=False)") in errors[0]
    assert not marker.exists()
