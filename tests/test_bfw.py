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
    assert n_missing >= 2 and row["n_skipped"] == 4 + n_missing
    assert row["n_pairs"] == len(csv) - row["n_skipped"]
    assert "bad_score: 2" in row["skipped_statuses"]
    assert f"missing: {n_missing}" in row["skipped_statuses"]
    other = evaluate_given_scores(tmp_path / "p.parquet", tmp_path / "r.parquet",
                                  tmp_path / "r", model="resnet50", benchmark="bfw")
    assert other["n_skipped"] == 2 + n_missing  # vgg16's bad cells do not touch resnet50


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
