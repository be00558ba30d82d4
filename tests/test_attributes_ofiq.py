"""The ``ofiq`` scorer (issue 36): OFIQ's mappings against its published constants, its
pixel measures against OFIQ's formulas, real Yale photos, and the wiring of the real OFIQ
(config checks, the merge of a CSV in OFIQ's output format)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA

from facecast.attributes.ofiq import (
    OFIQ_COMPONENTS,
    REAL_OFIQ_COMPONENTS,
    SIGMOIDS,
    column,
    cround,
    quality_value,
    scalar_conversion,
)
from facecast.attributes.ofiq_measures import lab_ab, luminance, natural_colour_native
from facecast.io.parquet_io import read_metadata, read_provenance

# ------------------------------------------------------------------ OFIQ's mappings

#: Sigmoid blocks copied from BSI-OFIQ/OFIQ-Project data/ofiq_config.jaxn (h, a, s, x0, w;
#: a/s default to 0/1 where the file leaves them out, Measure.h SigmoidParameters::Reset)
JAXN = {
    "UnderExposurePrevention": (120, 0.832, -1, 0.92, 0.05),
    "NaturalColour": (200, 1, -1, 0.0, 10.0),  # the file's key is "NaturalColor"
    "EyesOpen": (100, 0, 1, 0.02, 0.01),
    "MouthClosed": (100, 1, -1, 0.2, 0.06),
    "InterEyeDistance": (100, 0, 1, 70.0, 20.0),
    "HeadSize": (200, 1, -1, 0.0, 0.05),
    "LeftwardCropOfTheFaceImage": (100, 0, 1, 0.9, 0.1),
    "RightwardCropOfTheFaceImage": (100, 0, 1, 0.9, 0.1),
    "MarginBelowOfTheFaceImage": (100, 0, 1, 1.8, 0.1),
    "MarginAboveOfTheFaceImage": (100, 0, 1, 1.4, 0.1),
}


def c_sigmoid(x: float, x0: float, w: float) -> float:
    """Measure.h ``Sigmoid``: 1.0 / (1 + exp((x0 - x) / w))."""
    return 1.0 / (1 + math.exp((x0 - x) / w))


def c_round(x: float) -> float:
    """std::round: halves away from zero."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def c_scalar(raw: float, h: float, a: float, s: float, x0: float, w: float) -> float:
    """Measure.h ``ScalarConversion``: h * (a + s * Sigmoid), round, clamp to [0, 100]."""
    return min(100.0, max(0.0, c_round(h * (a + s * c_sigmoid(raw, x0, w)))))


def test_sigmoid_parameters_are_ofiqs():
    assert {k: tuple(float(v) for v in p) for k, p in SIGMOIDS.items()} == {
        k: tuple(float(v) for v in p) for k, p in JAXN.items()}


@pytest.mark.parametrize("component", sorted(JAXN))
def test_sigmoid_mappings_match_the_reference_formula(component):
    h, a, s, x0, w = JAXN[component]
    raws = np.array([x0 - 3 * w, x0 - w, x0, x0 + 0.5 * w, x0 + w, x0 + 4 * w])
    ours = quality_value(component, raws + (0.45 if component == "HeadSize" else 0.0))
    ref = [c_scalar(abs(r) if component == "HeadSize" else r, h, a, s, x0, w) for r in raws]
    np.testing.assert_array_equal(ours, ref)


def test_own_mappings_match_ofiqs_lines():
    # Luminance.cpp: round(100 * Sigmoid(mean, 0.2, 0.05) * (1 - Sigmoid(mean, 0.8, 0.05)))
    for m in (0.1, 0.2, 0.35, 0.5, 0.8, 0.95):
        assert quality_value("LuminanceMean", [m])[0] == c_round(
            100 * c_sigmoid(m, 0.2, 0.05) * (1 - c_sigmoid(m, 0.8, 0.05)))
    # Luminance.cpp: round(100 * sin((60 * variance) / (60 * variance + 1) * M_PI))
    for v in (0.0, 0.005, 0.0167, 0.05, 0.2):
        assert quality_value("LuminanceVariance", [v])[0] == max(0.0, c_round(
            100 * math.sin((60 * v) / (60 * v + 1) * math.pi)))
    # OverExposurePrevention.cpp: round(1.0 / (rawScore + 0.01)), clamped
    np.testing.assert_array_equal(quality_value("OverExposurePrevention", [0, 0.01, 0.5]),
                                  [100, 50, 2])
    # DynamicRange: 12.5 * entropy; IlluminationUniformity.cpp: round(100 * pow(raw, 0.3))
    np.testing.assert_array_equal(quality_value("DynamicRange", [8, 4, 0]), [100, 50, 0])
    assert quality_value("IlluminationUniformity", [0.5])[0] == c_round(100 * 0.5 ** 0.3)
    # SingleFacePresent.cpp: qc = round(100 * (1 - f)); HeadPose.cpp: round(100 cos^2)
    np.testing.assert_array_equal(quality_value("SingleFacePresent", [0, 0.5]), [100, 50])
    np.testing.assert_array_equal(quality_value("HeadPoseYaw", [0, 30, -30, 90]),
                                  [100, 75, 75, 0])
    # HeadSize.cpp: the sigmoid takes |T / H - 0.45|: 0.45 is best (200 * (1 - 0.5))
    assert quality_value("HeadSize", [0.45])[0] == 100
    assert np.isnan(quality_value("EyesOpen", [np.nan])[0])
    np.testing.assert_array_equal(cround([2.5, -2.5, 0.49]), [3, -3, 0])
    assert scalar_conversion(np.array([1e9]), 100, 0, 1, 4, 0.7)[0] == 100  # no overflow


def test_luminance_is_ofiqs_per_pixel_formula():
    """image_utils.cpp GetLuminanceImageFromBGR, pixel by pixel."""
    def lin(x: float) -> float:
        return ((x + 0.055) / 1.055) ** 2.4 if x > 0.04045 else x / 12.92

    rng = np.random.default_rng(0)
    px = rng.integers(0, 256, (200, 3)).astype(np.uint8)
    ref = [math.floor((0.2126 * lin(r / 255) + 0.7152 * lin(g / 255)
                       + 0.0722 * lin(b / 255)) * 255 + 0.5) for r, g, b in px]
    np.testing.assert_array_equal(luminance(px[None])[0], ref)


def test_natural_colour():
    a, b = lab_ab([205, 150, 120])  # a warm skin tone lies inside OFIQ's natural box
    assert 5 <= a <= 25 and 5 <= b <= 35 and natural_colour_native(a, b) == 0.0
    assert natural_colour_native(-1.0, 10.0) == 100.0  # NaturalColour.cpp: a < 0 -> 100
    assert natural_colour_native(30.0, 10.0) == pytest.approx(5.0)
    assert quality_value("NaturalColour", [0.0])[0] == 100


# ------------------------------------------------------------------ Yale photos

CONDITIONS = ("normal", "leftlight", "rightlight", "centerlight")


def _yale_paths() -> list[Path]:
    return (sorted(TEST_DATA.glob("yale/*/normal.gif"))
            + sorted(TEST_DATA.glob("yale/*/leftlight.gif"))
            + sorted(TEST_DATA.glob("yale_light/*/*.gif")))


@pytest.fixture(scope="module")
def yale_faces(tmp_path_factory) -> Path:
    """A faces shard (MTCNN boxes, landmarks, facenet crops) of the Yale photos."""
    from facecast.attributes.inputs import faces_table
    from facecast.faces.align import crop_facenet
    from facecast.faces.decode import read_image
    from facecast.faces.detect import FaceDetector, select_face

    paths = _yale_paths()
    images = [read_image(p).array for p in paths]
    rows = {"ids": [], "crops": [], "lm": [], "box": [], "n": []}
    for p, img, det in zip(paths, images, FaceDetector({"device": "cpu"}).detect(images),
                           strict=True):
        k = select_face(det, "largest", img.shape[1], img.shape[0])
        assert k is not None, p
        rows["ids"].append(f"{p.parent.name}/{p.stem}")
        rows["crops"].append(crop_facenet(img, det.boxes[k][:4]))
        rows["lm"].append(det.landmarks[k])
        rows["box"].append(det.boxes[k][:4])
        rows["n"].append(len(det))
    table = faces_table(rows["ids"], rows["crops"], np.array(rows["lm"]),
                        np.array(rows["box"]), image_size=images[0].shape[1::-1],
                        crop="facenet")
    table["n_faces"] = rows["n"]
    path = tmp_path_factory.mktemp("yale_ofiq") / "faces.parquet"
    table.to_parquet(path)
    return path


@pytest.fixture(scope="module")
def yale_scores(yale_faces) -> pd.DataFrame:
    from facecast.attributes.scoring import score_shard

    out = yale_faces.parent / "ofiq.parquet"
    table = score_shard("ofiq", yale_faces, out, {})
    table.attrs["path"] = out
    return table


def test_shard_columns_status_and_provenance(yale_scores):
    t = yale_scores
    expected = [c for comp in OFIQ_COMPONENTS for c in (column(comp), column(comp, True))]
    assert list(t.columns[3:]) == expected
    assert (t["status"] == "ok").all(), t[["image_id", "status", "message"]]
    values = t[[column(c) for c in OFIQ_COMPONENTS]]
    assert values.notna().all().all() and values.ge(0).all().all() and values.le(100).all().all()
    assert (values == values.round()).all().all()  # OFIQ's values are whole numbers
    prov = read_provenance(t.attrs["path"])
    assert prov["ofiq_source"] == "facecast" and prov["ofiq_conformant"] is False
    desc = read_metadata(t.attrs["path"])["facecast.attribute_columns"]
    assert "not conformant" in desc


def test_side_light_scores_lower_illumination_uniformity(yale_scores):
    t = yale_scores.assign(subject=yale_scores["image_id"].str.split("/").str[0],
                           cond=yale_scores["image_id"].str.split("/").str[1])
    u = t.pivot(index="subject", columns="cond", values=column("IlluminationUniformity"))
    assert set(CONDITIONS) <= set(u.columns) and len(u) == 5
    side = u[["leftlight", "rightlight"]].max(axis=1)
    centre = u[["centerlight", "normal"]].min(axis=1)
    assert (side < centre).all(), u
    assert u[["leftlight", "rightlight"]].median().max() < u["centerlight"].median() - 20


def test_one_frontal_face_scores_high_presence_and_pose(yale_scores):
    normal = yale_scores[yale_scores["image_id"].str.endswith("/normal")]
    assert len(normal) == 5
    assert (normal[column("SingleFacePresent")] == 100).all()
    assert (normal[column("SingleFacePresent", True)] == 0).all()
    assert (normal[column("HeadPoseYaw")] >= 90).all()
    assert (normal[column("HeadPoseRoll")] >= 90).all()
    assert (normal[column("HeadPosePitch")] >= 75).all()
    assert (normal[column("EyesOpen")] >= 80).all() and (normal[column("MouthClosed")] >= 80).all()


def test_rows_without_crop_or_box_keep_a_status(yale_faces, tmp_path):
    from facecast.attributes.scoring import score_shard

    t = pd.read_parquet(yale_faces).head(3).copy()
    t.loc[0, "crop_facenet"] = None
    t.loc[1, "bbox"] = None
    t.loc[2, "n_faces"] = 2
    t.to_parquet(tmp_path / "faces.parquet")
    out = score_shard("ofiq", tmp_path / "faces.parquet", tmp_path / "o.parquet", {})
    assert out["status"].tolist() == ["no_crop", "landmark_error", "ok"]
    assert "detection box" in out.loc[1, "message"]
    assert out.loc[:1, column("LuminanceMean")].isna().all()
    assert np.isnan(out.loc[2, column("SingleFacePresent")])
    assert "several faces" in out.loc[2, "message"]
    assert np.isfinite(out.loc[2, column("LuminanceMean")])


# ------------------------------------------------------------------ the real OFIQ: wiring

def _ofiq_csv(path: Path, rows: dict[str, tuple[float, float]]) -> None:
    """A CSV in OFIQSampleApp's format (ofiqpy/output.py): Filename; 28 natives; 28
    <Component>.scalar; assessment_time_in_ms; (trailing empty field)."""
    head = ["Filename", *REAL_OFIQ_COMPONENTS,
            *(f"{c}.scalar" for c in REAL_OFIQ_COMPONENTS), "assessment_time_in_ms", ""]
    lines = [";".join(head)]
    for name, (native, scalar) in rows.items():
        nat = [f"{native:.6f}"] * len(REAL_OFIQ_COMPONENTS)
        sca = [str(int(scalar))] * len(REAL_OFIQ_COMPONENTS)
        if name.endswith("3.png"):  # FailureToAssess on two components: (0, -1)
            nat[0], sca[0], nat[5], sca[5] = "0.000000", "-1", "0.000000", "-1"
        lines.append(";".join([f"/tmp/in/{name}", *nat, *sca, "812"]))
    path.write_text("\n".join(lines) + "\n")


def test_real_ofiq_csv_merges_as_ofiq_columns(yale_faces, tmp_path):
    from facecast.attributes.scoring import score_shard

    ids = pd.read_parquet(yale_faces, columns=["image_id"])["image_id"].tolist()[:4]
    faces = pd.read_parquet(yale_faces).head(4)
    faces.to_parquet(tmp_path / "faces.parquet")
    pd.DataFrame({"file": ["0000001.png", "0000002.png", "0000003.png", ""],
                  "image_id": ids, "status": ["ok", "ok", "ok", "missing"],
                  "message": ["", "", "", "not handed to OFIQ: no readable image file"]}
                 ).to_csv(tmp_path / "map.tsv", sep="\t", index=False)
    _ofiq_csv(tmp_path / "o.csv", {"0000001.png": (0.25, 80), "0000003.png": (0.5, 60)})
    cfg = {"ofiq": {"models_dir": str(tmp_path)}}
    out = score_shard("ofiq", tmp_path / "faces.parquet", tmp_path / "s.parquet", cfg,
                      ofiq_csv=str(tmp_path / "o.csv"), ofiq_map=str(tmp_path / "map.tsv"))
    assert len(out.columns) == 3 + 2 * 28
    assert out.loc[0, "ofiq_UnifiedQualityScore"] == 80
    assert out.loc[0, "ofiq_UnifiedQualityScore_native"] == 0.25
    assert out["status"].tolist() == ["ok", "ofiq_missing", "ok", "missing"]
    assert np.isnan(out.loc[2, "ofiq_UnifiedQualityScore"])  # FailureToAssess -> NaN
    assert out.loc[2, "ofiq_HeadSize"] == 60
    assert "UnifiedQualityScore" in out.loc[2, "message"]
    prov = read_provenance(tmp_path / "s.parquet")
    assert prov["ofiq_source"] == "ofiq" and prov["ofiq_models_dir"] == str(tmp_path)


def test_a_csv_not_in_ofiqs_format_is_an_error(tmp_path):
    from facecast.attributes.ofiq_real import read_ofiq_csv

    (tmp_path / "x.csv").write_text("Filename;UnifiedQualityScore\na.png;1\n")
    with pytest.raises(ValueError, match="not OFIQ's CSV format"):
        read_ofiq_csv(tmp_path / "x.csv")


def test_ofiq_inputs_folder(tmp_path):
    from facecast.attributes.ofiq_real import write_ofiq_inputs

    gif = sorted(TEST_DATA.glob("yale/*/normal.gif"))[0]
    jpg = sorted(TEST_DATA.glob("faces/*/1.jpg"))[0]
    rows = pd.DataFrame({"image_id": ["a", "b", "c", "d"],
                         "path": [str(gif.relative_to(TEST_DATA)),
                                  str(jpg.relative_to(TEST_DATA)), "nope.png", None],
                         "status": ["ok", "ok", "ok", "missing"]})
    table = write_ofiq_inputs(rows, TEST_DATA, tmp_path / "in", tmp_path / "map.tsv")
    assert table["file"].tolist() == ["0000000.png", "0000001.jpg", "", ""]
    assert (tmp_path / "in" / "0000001.jpg").is_symlink()
    assert not (tmp_path / "in" / "0000000.png").is_symlink()  # a GIF is written as PNG
    assert table["status"].tolist() == ["ok", "ok", "missing", "missing"]
    back = pd.read_csv(tmp_path / "map.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert back["image_id"].tolist() == ["a", "b", "c", "d"]


def _config(**attributes) -> dict:
    import yaml
    from conftest import REPO

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["attributes"].update(attributes)
    return cfg


def test_config_checks_name_the_key(tmp_path):
    from facecast.attributes.checks import config_errors, scorer_columns

    errs = config_errors(_config(scorers=["ofiq"], ofiq={"models_dir": str(tmp_path / "no")}))
    assert any(e.startswith("attributes.ofiq.models_dir:") and "not a folder" in e
               for e in errs), errs
    (tmp_path / "models").mkdir()
    errs = config_errors(_config(scorers=["ofiq"], ofiq={"models_dir": str(tmp_path)}))
    assert any("lacks ofiq_config.jaxn" in e for e in errs), errs
    (tmp_path / "ofiq_config.jaxn").write_text("{}")
    assert config_errors(_config(scorers=["ofiq"], ofiq={"models_dir": str(tmp_path)})) == []
    cfg = _config(scorers=["ofiq"])
    cfg["faces"]["crops"] = ["arcface"]
    assert any("add facenet to faces.crops" in e for e in config_errors(cfg))
    cols = scorer_columns(_config(scorers=["ofiq"]), set(), [])
    assert cols == {c for comp in OFIQ_COMPONENTS for c in (column(comp), column(comp, True))}
    real = scorer_columns(_config(scorers=["ofiq"], ofiq={"models_dir": str(tmp_path)}),
                          set(), [])
    assert "ofiq_UnifiedQualityScore" in real and len(real) == 56


def test_real_ofiq_inputs_join_the_score_job(tmp_path):
    from facecast.attributes.targets import score_inputs, uses_real_ofiq

    cfg = _config(scorers=["native", "ofiq"], ofiq={"models_dir": str(tmp_path)})
    assert uses_real_ofiq(cfg)
    inputs = score_inputs(cfg, "demo", "ofiq", "shard-000")
    assert inputs["ofiq_csv"] == "results/demo/attributes/ofiq/shard-000.ofiq.csv"
    assert inputs["ofiq_map"] == "results/demo/attributes/ofiq/shard-000.map.tsv"
    assert "ofiq_csv" not in score_inputs(_config(scorers=["ofiq"]), "demo", "ofiq", "s")
