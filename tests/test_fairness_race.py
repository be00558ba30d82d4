"""Issue 50, item 5: an estimated race as a group - ``fairface_race`` (argmax of the
FairFace head's seven probabilities) and its 4- and 5-race groupings."""

import copy

import numpy as np
import pandas as pd
from conftest import REPO, TEST_DATA

from facecast.config.check import collect
from facecast.config.prepare import resolve_config
from facecast.config.util import module_constant
from facecast.fairness.assess import load_attributes
from facecast.fairness.groups import image_labels, parse_specs
from facecast.fairness.race import RACES, add_race_columns, race_sources, source_columns
from facecast.io.parquet_io import write_parquet

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def _probs(rows):
    """Attribute rows from per-image probability lists in RACES order (None = missing)."""
    data = {c: [np.nan if r is None else r[i] for r in rows]
            for i, c in enumerate(race_sources())}
    return pd.DataFrame({"image_id": [f"i{k}" for k in range(len(rows))],
                         "identity": [f"p{k}" for k in range(len(rows))], **data})


def test_argmax_and_the_papers_groupings():
    eye = np.eye(7)
    rows = [list(0.1 + 0.8 * eye[k]) for k in range(7)] + [None]
    out = add_race_columns(_probs(rows), ["fairface_race", "fairface_race4",
                                          "fairface_race5"])
    out = out.astype(object).where(out.notna(), None)
    assert out["fairface_race"].tolist() == [*RACES, None]
    assert out["fairface_race4"].tolist() == ["white", "black", None, "asian", "asian",
                                              "indian", None, None]
    assert out["fairface_race5"].tolist() == ["white", "black", "others", "asian", "asian",
                                              "indian", "others", None]


def test_races_are_the_scorers_columns():
    assert list(RACES) == module_constant("facecast.attributes.heads", "FAIRFACE_RACES")
    assert source_columns(["label_male", "fairface_race", "fairface_race4"]) == \
        ["label_male", *race_sources()]


def test_load_attributes_derives_the_race_and_groups_follow(tmp_path):
    rows = [[0.7, 0.1, 0.05, 0.05, 0.04, 0.03, 0.03], [0.1, 0.1, 0.1, 0.4, 0.2, 0.05, 0.05]]
    write_parquet(_probs(rows), tmp_path / "a.parquet")
    attrs = load_attributes(tmp_path / "a.parquet", ["p0", "p1"], ["fairface_race4"])
    assert attrs["fairface_race4"].tolist() == ["white", "asian"]
    assert "fairface_race" not in attrs.columns
    specs = parse_specs({"race": {"column": "fairface_race4"}})
    labels = image_labels(attrs, specs, [], sync="majority")
    assert labels.loc["i1", "group"] == "asian" and labels.loc["i0", "group"] == "white"


def _config(scorers):
    return {"datasets": {"mine": {"kind": "folder", "root": str(TEST_DATA / "yale")}},
            "embed": {"models": {"dlib": {"backend": "dlib_resnet"}}},
            "attributes": {"scorers": scorers},
            "fairness": {"protected": {"race": {"column": "fairface_race"}}}}


def test_fairface_race_passes_the_checks_with_the_fairface_scorer():
    cfg = copy.deepcopy(_config(["native", "fairface"]))
    resolve_config(cfg, SCHEMA)
    assert [e for e in collect(cfg)[0] if "fairness.protected" in e] == []
    cfg = copy.deepcopy(_config(["native"]))
    resolve_config(cfg, SCHEMA)
    errs = [e for e in collect(cfg)[0] if e.startswith("fairness.protected.race.column")]
    assert len(errs) == 7 and "fairface_white" in errs[0]
