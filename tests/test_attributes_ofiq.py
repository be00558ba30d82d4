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
from reference.common import as_float, read_record

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

#: OFIQ's config keys of facecast's sigmoid components (data/ofiq_config.jaxn): the
#: file spells NaturalColor, a key OFIQ never reads, so NaturalColour.cpp's constructor
#: defaults apply (the same numbers)
JAXN_KEYS = {c: c for c in SIGMOIDS} | {"NaturalColour": "NaturalColor"}


def _jaxn() -> dict[str, tuple[float, ...]]:
    """(h, a, s, x0, w) of each sigmoid component from the recorded config; a and s take
    Measure.h's defaults 0 and 1 where the file leaves them out (SigmoidParameters::Reset)."""
    flat = read_record("ofiq", "sigmoids")["outputs"]
    out = {}
    for comp, key in JAXN_KEYS.items():
        get = {k.rsplit(".", 1)[1]: v for k, v in flat.items()
               if k.startswith(f"params.measures.{key}.Sigmoid.")}
        assert get["round"] is True, comp
        out[comp] = (get["h"], get.get("a", 0.0), get.get("s", 1.0), get["x0"], get["w"])
    return out


JAXN = _jaxn()


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
    t.to_parquet(tmp_path / "faces.parquet")  # a shard without face_box_areas (older)
    out = score_shard("ofiq", tmp_path / "faces.parquet", tmp_path / "o.parquet", {})
    assert out["status"].tolist() == ["no_crop", "landmark_error", "ok"]
    assert "detection box" in out.loc[1, "message"]
    assert out.loc[:1, column("LuminanceMean")].isna().all()
    assert np.isnan(out.loc[2, column("SingleFacePresent")])
    assert "no face_box_areas" in out.loc[2, "message"]
    assert np.isfinite(out.loc[2, column("LuminanceMean")])


def test_several_faces_score_from_the_box_areas(yale_faces, tmp_path):
    """SingleFacePresent.cpp: f = a2 / a1 of the two largest boxes (not its square root)."""
    from facecast.attributes.scoring import score_shard

    t = pd.read_parquet(yale_faces).head(3).copy()
    t["n_faces"] = [1, 2, 3]
    t["face_box_areas"] = [[5000.0], [5000.0, 1250.0], [900.0, 3600.0, 100.0]]
    t.to_parquet(tmp_path / "faces.parquet")
    out = score_shard("ofiq", tmp_path / "faces.parquet", tmp_path / "o.parquet", {})
    assert out[column("SingleFacePresent", True)].tolist() == [0.0, 0.25, 0.25]
    assert out[column("SingleFacePresent")].tolist() == [100.0, 75.0, 75.0]
    assert not out["message"].str.contains("SingleFacePresent").any()


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


# ------------------------------------------------------------------ OFIQ's own output

def test_mappings_reproduce_ofiqs_conformance_table():
    """Every (native, scalar) pair OFIQ wrote for the ISO conformance images."""
    table = read_record("ofiq", "conformance_table")["outputs"]
    assert len(table) == 28
    for comp in OFIQ_COMPONENTS:
        native = np.array([table[img][comp][0] for img in sorted(table)])
        scalar = np.array([table[img][comp][1] for img in sorted(table)])
        np.testing.assert_array_equal(quality_value(comp, native), scalar, err_msg=comp)


def test_head_pose_beyond_90_degrees_scores_0_as_ofiq():
    """HeadPose.cpp clamps the cosine before squaring: roll 180 / 120 / -100 give 0."""
    rec = read_record("ofiq", "head_pose")
    names = ("HeadPosePitch", "HeadPoseYaw", "HeadPoseRoll")
    for pose, out in zip(rec["inputs"]["poses"], rec["outputs"], strict=True):
        for comp, angle in zip(names, pose, strict=True):
            assert out[comp][0] == angle
            assert quality_value(comp, [angle])[0] == out[comp][1], (comp, angle)
    np.testing.assert_array_equal(quality_value("HeadPoseRoll", [180, 120, -100, 90.5]), 0)
    assert {a for p in rec["inputs"]["poses"] for a in p} >= {180.0, 120.0, -100.0}


def test_single_face_present_is_ofiqs_area_ratio():
    from facecast.attributes.ofiq_landmarks import single_face

    rec = read_record("ofiq", "single_face_present")
    sizes = rec["inputs"]["box_sizes"]
    f, msg = single_face(np.array([len(b) for b in sizes]),
                         [[w * h for w, h in boxes] for boxes in sizes])
    expect = np.array([out["SingleFacePresent"] for out in rec["outputs"]], dtype=object)
    np.testing.assert_array_equal(f, expect[:, 0].astype(float))
    np.testing.assert_array_equal(quality_value("SingleFacePresent", f), expect[:, 1])
    assert (msg == "").all()


def _assessed(out: list, ours: float, q: float) -> bool:
    """Our (native, quality) against OFIQ's [raw, scalar, code]: FailureToAssess is NaN."""
    raw, scalar, code = as_float(out[0]), out[1], out[2]
    if code == "FailureToAssess":
        return bool(np.isnan(ours) and np.isnan(q))
    return ours == raw and q == scalar


def test_geometry_natives_are_ofiqs_on_hostile_landmarks():
    """CropOfTheFaceImage (T from the eye midpoint rounded to whole pixels), HeadSize,
    InterEyeDistance (yaw at 90 degrees: FailureToAssess), MouthClosed and EyesOpen of OFIQ
    itself, on tiny images, faces past the borders and upside-down faces."""
    from reference.ofiq_inputs import geometry_cases

    from facecast.attributes.ofiq_landmarks import geometry_natives

    rec = read_record("ofiq", "geometry")
    cases = geometry_cases(rec["inputs"]["seed"], rec["inputs"]["n_random"])
    pts = np.array([c["landmarks"] for c in cases])
    natives = geometry_natives(pts, pts, np.array([c["yaw"] for c in cases]),
                               np.array([c["width"] for c in cases], float),
                               np.array([c["height"] for c in cases], float))
    assert len(rec["outputs"]) == len(cases) == 32
    for comp, values in natives.items():
        q = quality_value(comp, values)
        bad = [k for k, out in enumerate(rec["outputs"])
               if not _assessed(out[comp], values[k], q[k])]
        assert not bad, (comp, [(values[k], rec["outputs"][k][comp]) for k in bad])
    codes = [out["InterEyeDistance"][2] for out in rec["outputs"]]
    assert codes.count("FailureToAssess") == 2


def test_natural_colour_is_ofiqs_with_grey_faces():
    """NaturalColour.cpp: IsColoured first (a grey face: D = 0, quality 100; one coloured
    pixel anywhere: the CIELAB path), then the cheek zones' mean colour."""
    from reference.ofiq_inputs import colour_image

    from facecast.attributes.ofiq_measures import pixel_natives

    rec = read_record("ofiq", "natural_colour")
    for name, (seed, kind) in rec["inputs"]["cases"].items():
        img, pts = colour_image(seed, kind)
        vals, note = pixel_natives(img, np.ones(img.shape[:2], np.uint8), pts)
        raw, scalar, code = rec["outputs"][name]["NaturalColour"]
        assert code == "Success" and note == ""
        # the mean colour's CIELAB sums in another order: equal to ~1e-15 relative
        assert vals["NaturalColour"] == pytest.approx(raw, rel=1e-12, abs=1e-12), name
        assert quality_value("NaturalColour", [vals["NaturalColour"]])[0] == scalar, name
    grey = [n for n, (_, k) in rec["inputs"]["cases"].items() if k.startswith("grey_") or k == "grey"]
    assert rec["outputs"]["grey"]["NaturalColour"][:2] == [0.0, 100.0] and len(grey) == 3


def test_pixel_natives_of_a_flat_and_a_split_face():
    """pixel_natives against values worked out here: a flat face has OFIQ's per-pixel
    luminance as its mean, no variance or entropy, equal cheeks; a face whose left and
    right halves differ has disjoint cheek histograms (IlluminationUniformity 0), and a
    grey small image is not coloured."""
    from reference.ofiq_inputs import colour_image

    from facecast.attributes.ofiq_measures import FRAME, cheek_zones, pixel_natives

    _, pts = colour_image(1, "grey")
    ones = np.ones((FRAME, FRAME), np.uint8)
    for rgb in [(200, 200, 200), (10, 12, 14), (250, 250, 250)]:
        flat = np.broadcast_to(np.array(rgb, np.uint8), (FRAME, FRAME, 3)).copy()
        vals, _ = pixel_natives(flat, ones, pts)
        lum = math.floor(sum(c * _linear(v / 255) for c, v in zip((0.2126, 0.7152, 0.0722),
                                                                   rgb, strict=True)) * 255 + 0.5)
        assert vals["LuminanceMean"] == pytest.approx(lum / 255, abs=1e-12)
        assert vals["LuminanceVariance"] == pytest.approx(0, abs=1e-15)
        assert vals["DynamicRange"] == 0 and vals["IlluminationUniformity"] == pytest.approx(1)
        assert vals["UnderExposurePrevention"] == (lum <= 25)
        assert vals["OverExposurePrevention"] == (lum >= 247)
        # grey: IsColoured fails, D = 0; coloured: the zones' mean is the colour itself
        assert vals["NaturalColour"] == (0.0 if len(set(rgb)) == 1
                                         else natural_colour_native(*lab_ab(rgb)))
    (lx, _, s), (rx, _, _) = cheek_zones(pts)
    split = np.full((FRAME, FRAME, 3), 60, np.uint8)
    split[:, (lx + s + rx) // 2:] = 180
    vals, _ = pixel_natives(split, ones, pts)
    assert vals["IlluminationUniformity"] == 0 and vals["NaturalColour"] == 0.0
    assert 0.9 < vals["DynamicRange"] <= 1.0  # two luminances, about half and half


def _linear(x: float) -> float:
    return ((x + 0.055) / 1.055) ** 2.4 if x > 0.04045 else x / 12.92


# ------------------------------------------------------------------ one fit, two readers

def test_one_landmark_fit_serves_ofiq_and_features(yale_faces, yale_scores, tmp_path):
    """Issue 40.7: the ofiq job's landmark shard equals the features_shard route's table,
    its ofiq columns equal a run without it, and every hostile row keeps a status."""
    from facecast.attributes.landmarks68 import head_pose, measurements
    from facecast.attributes.ofiq_landmarks import fit_68, load_predictor
    from facecast.attributes.scoring import score_shard
    from facecast.faces.align import facenet_box
    from facecast.faces.crops import decode_crop
    from facecast.labels.features import run_features_shard

    t = pd.read_parquet(yale_faces).head(6).copy()
    t.loc[0, "crop_facenet"] = None
    t.loc[1, "bbox"] = None
    t.loc[2, "status"] = "no_face"
    t.loc[3, "crop_facenet"] = t.loc[3, "crop_facenet"][:40]  # truncated PNG
    faces = tmp_path / "faces.parquet"
    t.to_parquet(faces)
    scores = score_shard("ofiq", faces, tmp_path / "o.parquet", {},
                         landmarks_out=tmp_path / "lm.parquet")
    plain = score_shard("ofiq", faces, tmp_path / "plain.parquet", {})
    pd.testing.assert_frame_equal(scores, plain)
    ok_ids = t["image_id"].iloc[4:].tolist()
    ref = yale_scores.set_index("image_id").loc[ok_ids].reset_index()
    pd.testing.assert_frame_equal(scores.iloc[4:].reset_index(drop=True), ref)

    shared = pd.read_parquet(tmp_path / "lm.parquet")
    run_features_shard(faces, tmp_path / "f.parquet")  # where the ofiq scorer does not run
    alone = pd.read_parquet(tmp_path / "f.parquet")
    pd.testing.assert_frame_equal(shared, alone)
    assert shared["status"].tolist() == ["no_crop", "no_crop", "no_face", "landmark_error",
                                         "ok", "ok"]
    assert shared.loc[2, "message"] == "faces status no_face"
    assert "does not decode" in shared.loc[3, "message"]
    assert shared.loc[:3, "landmarks"].isna().all() and shared.loc[:3, "m_nose_width"].isna().all()
    # the ok rows: dlib inside the box mapped into the crop, back as x1 + p / sx
    pred = load_predictor()
    for i in (4, 5):
        r = t.iloc[i]
        b = np.asarray(r["bbox"], dtype=float)
        x1, y1, x2, y2 = facenet_box(b, (int(r["image_width"]), int(r["image_height"])), 160,
                                     14.0)
        sx, sy = 160 / (x2 - x1), 160 / (y2 - y1)
        box = np.array([(b[0] - x1) * sx, (b[1] - y1) * sy, (b[2] - x1) * sx, (b[3] - y1) * sy])
        p = fit_68(pred, decode_crop(r["crop_facenet"]), box)
        img = np.stack([x1 + p[:, 0] / sx, y1 + p[:, 1] / sy], axis=1)
        assert shared.loc[i, "landmarks"].tolist() == img.reshape(-1).astype(np.float32).tolist()
        assert shared.loc[i, "m_nose_width"] == measurements(p[None])["nose_width"][0]
        pose = head_pose(p[None], 160.0)[0]
        np.testing.assert_allclose(shared.loc[i, ["pose_yaw", "pose_pitch", "pose_roll"]]
                                   .to_numpy(float), pose, rtol=0, atol=1e-9)


def test_the_landmark_fit_is_shared_only_where_both_run():
    """features read the ofiq job's landmark shards when facecast's ofiq scorer runs and
    the features are on; the real OFIQ fits no dlib points, so features_shard runs."""
    from facecast.attributes.targets import LANDMARKS, ofiq_writes_landmarks, score_regex
    from facecast.labels.targets import FEATURES_SHARD, feature_shards

    def shards(cfg: dict) -> list[str]:
        return feature_shards(cfg, "demo", lambda pat, ds: [pat.format(ds=ds, shard="s0")])

    cfg = _config(scorers=["native", "ofiq"])
    cfg["features"] = {"enabled": True}
    assert ofiq_writes_landmarks(cfg) and "ofiq" not in score_regex(cfg).split("|")
    assert shards(cfg) == [LANDMARKS.format(ds="demo", shard="s0")]
    for other in (_config(scorers=["native", "ofiq"], ofiq={"models_dir": "/x"}),
                  _config(scorers=["native"]), {**cfg, "features": {"enabled": False}}):
        other.setdefault("features", {"enabled": True})
        assert not ofiq_writes_landmarks(other)
        assert "ofiq" in score_regex(other).split("|")
        assert shards(other) == [FEATURES_SHARD.format(ds="demo", shard="s0")]
