"""Record what OFIQ (BSI-OFIQ/OFIQ-Project) computes, for the ``ofiq`` scorer's tests (our code).

``record(checkout)`` writes under ``tests/data/reference/ofiq/``:

* ``conformance_table``: OFIQ's own output on the ISO conformance images, read from the
  checkout's ``data/tests/expected_results/expected_results.csv`` (a data file of the
  reference: per image, every component's native and scalar value); the images are not
  in the checkout, so the tests check the native -> scalar mappings on these pairs.
* ``sigmoids``: the ``Sigmoid`` blocks of ``data/ofiq_config.jaxn`` as OFIQ's
  ``Configuration`` flattens them (``params.measures.<key>.Sigmoid.<h|a|s|x0|w|round>``).
* With ``FACECAST_OFIQ_HARNESS`` set: ``head_pose``, ``single_face_present``, ``geometry``
  and ``natural_colour``: the values OFIQ's measure classes (``HeadPose``,
  ``SingleFacePresent``, ``CropOfTheFaceImage``, ``HeadSize``, ``InterEyeDistance``,
  ``MouthClosed``, ``EyesOpen``, ``NaturalColour``; ``Execute`` on a session holding our
  inputs) set on the hostile inputs of :mod:`ofiq_inputs`. The variable names an
  executable outside this tree, built from the checkout's sources (nothing of it is in
  this repository; docs/CONTRIBUTING.md "Reference records" says what it does), called as
  ``<harness> <checkout>/data <inputs.json> <outputs.json>``: ``inputs.json`` holds
  ``{"cases": [...]}`` (``kind`` ``pose`` / ``faces`` / ``geometry`` / ``colour``), and
  the harness answers ``{"results": [{<measure>: [raw, scalar, code]} | {"error": ...}]}``
  in the same order. Without it those records stay as they are.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import checkout_commit, write_record
from ofiq_inputs import (
    COLOUR_CASES,
    FACE_BOX_SETS,
    POSE_ANGLES,
    colour_image,
    geometry_cases,
    to_adnet,
)

REPO = "BSI-OFIQ/OFIQ-Project"
TABLE = "data/tests/expected_results/expected_results.csv"
CONFIG = "data/ofiq_config.jaxn"
HARNESS_ENV = "FACECAST_OFIQ_HARNESS"
MEASURES = "OFIQlib/modules/measures/src/"
#: seeds of the geometry cases (ofiq_inputs.geometry_cases)
GEOMETRY_SEED, GEOMETRY_RANDOM = 29794, 24


def read_table(checkout: Path) -> dict[str, dict[str, list]]:
    """``{image file name: {component: [native, scalar]}}`` of OFIQ's conformance CSV."""
    with open(Path(checkout) / TABLE, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh, delimiter=";") if r]
    head = [h.strip() for h in rows[0]]
    comps = [h for h in head[1:] if h and not h.endswith(".scalar")]
    out = {}
    for r in rows[1:]:
        cell = dict(zip(head, r, strict=False))
        out[Path(cell["Filename"]).name] = {c: [float(cell[c]), float(cell[f"{c}.scalar"])]
                                            for c in comps}
    return out


def _strip_comments(text: str) -> str:
    """The jaxn text without ``//`` line comments outside strings, nor trailing commas."""
    lines = []
    for line in text.splitlines():
        in_str = False
        for k, ch in enumerate(line):
            if ch == '"' and (k == 0 or line[k - 1] != "\\"):
                in_str = not in_str
            elif ch == "/" and not in_str and line[k:k + 2] == "//":
                line = line[:k]
                break
        lines.append(line)
    return re.sub(r",(\s*[}\]])", r"\1", "\n".join(lines))


def read_sigmoids(checkout: Path) -> dict[str, dict[str, Any]]:
    """``{flattened key: value}`` of every ``params.measures.*.Sigmoid.*`` entry of the
    config, keyed as OFIQ's Configuration flattens the ``config`` object."""
    doc = json.loads(_strip_comments((Path(checkout) / CONFIG).read_text()))
    flat: dict[str, Any] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else k)
        else:
            flat[path] = value

    walk(doc["config"], "")
    return {k: v for k, v in flat.items() if re.fullmatch(r"params\.measures\..+\.Sigmoid\.\w+", k)}


def harness_cases() -> tuple[list[dict[str, Any]], dict[str, slice]]:
    """Every harness case (images of the colour cases to be written beside the inputs
    file) and which slice of them each record takes."""
    n = len(POSE_ANGLES)
    cases: list[dict[str, Any]] = [
        {"kind": "pose", "pose": [POSE_ANGLES[i], POSE_ANGLES[(i + 7) % n],
                                  POSE_ANGLES[(i + 13) % n]]} for i in range(n)]
    cases += [{"kind": "faces", "boxes": [[0, 0, w, h] for w, h in boxes]}
              for boxes in FACE_BOX_SETS]
    cases += [{"kind": "geometry", "width": c["width"], "height": c["height"], "yaw": c["yaw"],
               "landmarks": to_adnet(c["landmarks"]).astype(int).tolist()}
              for c in geometry_cases(GEOMETRY_SEED, GEOMETRY_RANDOM)]
    for name, (seed, kind) in COLOUR_CASES.items():
        img, pts = colour_image(seed, kind)
        cases.append({"kind": "colour", "width": img.shape[1], "height": img.shape[0],
                      "image": f"{name}.bgr", "landmarks": to_adnet(pts).astype(int).tolist(),
                      "_pixels": img})
    k1, k2 = n + len(FACE_BOX_SETS), len(cases) - len(COLOUR_CASES)
    return cases, {"head_pose": slice(0, n), "single_face_present": slice(n, k1),
                   "geometry": slice(k1, k2), "natural_colour": slice(k2, len(cases))}


def run_harness(harness: str, checkout: Path, cases: list[dict[str, Any]]
                ) -> tuple[list[dict], str]:
    """The harness's results for ``cases`` (see the module doc) and the OpenCV version it
    was linked with."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = []
        for c in cases:
            c = dict(c)
            pixels = c.pop("_pixels", None)
            if pixels is not None:  # OFIQ's images are BGR
                (Path(tmp) / c["image"]).write_bytes(np.ascontiguousarray(pixels[..., ::-1]).tobytes())
            plain.append(c)
        (Path(tmp) / "inputs.json").write_text(json.dumps({"cases": plain}))
        subprocess.run([harness, str(Path(checkout) / "data"), f"{tmp}/inputs.json",
                        f"{tmp}/outputs.json"], check=True)
        answer = json.loads((Path(tmp) / "outputs.json").read_text())
    results = answer["results"]
    if len(results) != len(cases):
        raise RuntimeError(f"{harness} answered {len(results)} results for {len(cases)} cases")
    return results, str(answer.get("opencv", "unknown"))


def _harness_records(checkout: Path, commit: str, harness: str) -> list[Path]:
    cases, parts = harness_cases()
    results, opencv = run_harness(harness, checkout, cases)
    common = {"repo": REPO, "commit": commit}
    runner = (f"OFIQ's own sources at this commit, compiled outside facecast's tree with "
              f"OpenCV {opencv}; {HARNESS_ENV}")
    out = [write_record(
        "ofiq", "head_pose", **common, path=MEASURES + "HeadPose.cpp",
        function="HeadPose::Execute (CalculateQuality per angle)",
        inputs={"poses": [c["pose"] for c in cases[parts["head_pose"]]],
                "order": "pitch, yaw, roll", "runner": runner},
        outputs=results[parts["head_pose"]])]
    out.append(write_record(
        "ofiq", "single_face_present", **common, path=MEASURES + "SingleFacePresent.cpp",
        function="SingleFacePresent::Execute",
        inputs={"box_sizes": FACE_BOX_SETS, "runner": runner},
        outputs=results[parts["single_face_present"]]))
    out.append(write_record(
        "ofiq", "geometry", **common,
        path=MEASURES + "{CropOfTheFaceImage,HeadSize,InterEyeDistance,MouthClosed,EyesOpen}.cpp",
        function="CropOfTheFaceImage, HeadSize, InterEyeDistance, MouthClosed, EyesOpen "
                 "::Execute (landmarks = aligned landmarks = ofiq_inputs.to_adnet(case))",
        inputs={"builder": "ofiq_inputs.geometry_cases", "seed": GEOMETRY_SEED,
                "n_random": GEOMETRY_RANDOM, "runner": runner},
        outputs=results[parts["geometry"]]))
    out.append(write_record(
        "ofiq", "natural_colour", **common, path=MEASURES + "NaturalColour.cpp",
        function="NaturalColour::Execute (aligned face and landmarks of "
                 "ofiq_inputs.colour_image; landmarked region: the whole image)",
        inputs={"builder": "ofiq_inputs.colour_image", "cases": COLOUR_CASES,
                "runner": runner},
        outputs=dict(zip(COLOUR_CASES, results[parts["natural_colour"]], strict=True))))
    return out


def record(checkout: Path) -> list[Path]:
    """Write the OFIQ records (see the module doc) and return their paths."""
    checkout = Path(checkout)
    commit = checkout_commit(checkout)
    out = [write_record("ofiq", "conformance_table", repo=REPO, commit=commit, path=TABLE,
                        function="OFIQSampleApp's CSV on the ISO conformance images "
                                 "(native, scalar per component)",
                        inputs={"images": "data/tests/images (ISO portal; not in the checkout)"},
                        outputs=read_table(checkout)),
           write_record("ofiq", "sigmoids", repo=REPO, commit=commit, path=CONFIG,
                        function="Configuration's flattened params.measures.*.Sigmoid.*",
                        inputs={}, outputs=read_sigmoids(checkout))]
    harness = os.environ.get(HARNESS_ENV)
    if harness:
        out += _harness_records(checkout, commit, harness)
    else:
        print(f"ofiq: {HARNESS_ENV} is not set; the harness records stay as they are")
    return out
