"""OFIQ (ISO/IEC 29794-5) quality components from OFIQ's published definitions.

OFIQ is the BSI's open reference implementation of ISO/IEC 29794-5 (MIT licence,
``BSI-OFIQ/OFIQ-Project``). This module holds the components' names, OFIQ's mappings from
a native measure to a 0-100 quality value, and the scorer's column descriptions; the
measures themselves are :mod:`facecast.attributes.ofiq_measures` (pixels of the aligned
face) and :mod:`facecast.attributes.ofiq_landmarks` (geometry). Our own code, read from:

* ``OFIQlib/modules/measures/Measure.h``: ``ScalarConversion`` =
  ``h * (a + s * sigmoid(x; x0, w))``, ``std::round`` when ``round``, clamped to [0, 100];
  ``sigmoid(x; x0, w) = 1 / (1 + exp((x0 - x) / w))``; defaults h=100, a=0, s=1, x0=4,
  w=0.7, round=true (``SigmoidParameters::Reset``); ``setInverse`` = a=1, s=-1.
* ``data/ofiq_config.jaxn`` (``params.measures.<name>.Sigmoid``) and each measure's
  constructor for the parameters (:data:`SIGMOIDS`).
* The measures with their own mapping: ``Luminance.cpp`` (LuminanceMean: ``round(100 *
  sigmoid(m; 0.2, 0.05) * (1 - sigmoid(m; 0.8, 0.05)))``; LuminanceVariance: ``round(100 *
  sin(60 v / (60 v + 1) * pi))``), ``OverExposurePrevention.cpp`` (``round(1 / (f +
  0.01))``), ``DynamicRange.cpp`` (``12.5 * entropy``), ``IlluminationUniformity.cpp``
  (``round(100 * D^0.3)``), ``SingleFacePresent.cpp`` (``round(100 * (1 - f))`` in single
  precision), ``HeadPose.cpp`` (``CalculateQuality``: ``round(100 * max(0, cos(angle))^2)``,
  the cosine clamped to >= 0 before it is squared, so every angle beyond +-90 degrees
  scores 0), ``HeadSize.cpp`` (the sigmoid takes ``|T / H - 0.45|``).

``tests/test_attributes_ofiq.py`` compares these mappings with OFIQ's own output: the
conformance table OFIQ ships and OFIQ's measure classes run on hostile inputs (records under
``tests/data/reference/ofiq/``, docs/CONTRIBUTING.md "Reference records").

These are APPROXIMATIONS of OFIQ, not OFIQ: facecast's detector (MTCNN/YuNet, not SSD),
dlib's 68 landmarks (not ADNet's 98), a 308 px alignment (half OFIQ's 616 px frame), a
5-point head pose (not 3DDFA-V2) and no occlusion segmentation (the exposure measures use
the landmarked region alone). Nothing here is conformant; the real OFIQ runs through
``ofiqpy`` when ``attributes.ofiq.models_dir`` is set (:mod:`facecast.attributes.ofiq_real`).
"""

from __future__ import annotations

import numpy as np

#: Components the ``ofiq`` scorer computes (OFIQ's names; columns ``ofiq_<name>`` and
#: ``ofiq_<name>_native``). EyesOpen and MouthClosed need eyelids and inner lips: dlib's
#: 68 points carry them.
OFIQ_COMPONENTS = (
    "LuminanceMean", "LuminanceVariance", "UnderExposurePrevention", "OverExposurePrevention",
    "DynamicRange", "IlluminationUniformity", "NaturalColour", "InterEyeDistance", "HeadSize",
    "LeftwardCropOfTheFaceImage", "RightwardCropOfTheFaceImage", "MarginAboveOfTheFaceImage",
    "MarginBelowOfTheFaceImage", "SingleFacePresent", "HeadPoseYaw", "HeadPosePitch",
    "HeadPoseRoll", "EyesOpen", "MouthClosed",
)

#: The 28 columns of the real OFIQ (v1.1.0's OFIQSampleApp CSV order; ofiqpy's
#: ``results.OFIQ_COMPONENTS``).
REAL_OFIQ_COMPONENTS = (
    "UnifiedQualityScore", "BackgroundUniformity", "IlluminationUniformity", "LuminanceMean",
    "LuminanceVariance", "UnderExposurePrevention", "OverExposurePrevention", "DynamicRange",
    "Sharpness", "CompressionArtifacts", "NaturalColour", "SingleFacePresent", "EyesOpen",
    "MouthClosed", "EyesVisible", "MouthOcclusionPrevention", "FaceOcclusionPrevention",
    "InterEyeDistance", "HeadSize", "LeftwardCropOfTheFaceImage",
    "RightwardCropOfTheFaceImage", "MarginAboveOfTheFaceImage", "MarginBelowOfTheFaceImage",
    "HeadPoseYaw", "HeadPosePitch", "HeadPoseRoll", "ExpressionNeutrality", "NoHeadCoverings",
)

#: OFIQ's sigmoid parameters (h, a, s, x0, w; round = true for all), from
#: data/ofiq_config.jaxn and the measures' constructors (sources in the module doc).
SIGMOIDS = {
    "UnderExposurePrevention": (120.0, 0.832, -1.0, 0.92, 0.05),
    "NaturalColour": (200.0, 1.0, -1.0, 0.0, 10.0),
    "InterEyeDistance": (100.0, 0.0, 1.0, 70.0, 20.0),
    "HeadSize": (200.0, 1.0, -1.0, 0.0, 0.05),
    "LeftwardCropOfTheFaceImage": (100.0, 0.0, 1.0, 0.9, 0.1),
    "RightwardCropOfTheFaceImage": (100.0, 0.0, 1.0, 0.9, 0.1),
    "MarginAboveOfTheFaceImage": (100.0, 0.0, 1.0, 1.4, 0.1),
    "MarginBelowOfTheFaceImage": (100.0, 0.0, 1.0, 1.8, 0.1),
    "EyesOpen": (100.0, 0.0, 1.0, 0.02, 0.01),
    "MouthClosed": (100.0, 1.0, -1.0, 0.2, 0.06),
}

#: component -> what its native value is (the ``_native`` column's description)
NATIVE_MEANING = {
    "LuminanceMean": "mean luminance (0-1) of the landmarked face region",
    "LuminanceVariance": "variance of that luminance (0-1 scale)",
    "UnderExposurePrevention": "fraction of face pixels with luminance <= 25 (of 255)",
    "OverExposurePrevention": "fraction of face pixels with luminance >= 247 (of 255)",
    "DynamicRange": "entropy (bits) of the face-region luminance histogram",
    "IlluminationUniformity": "intersection of the normalised luminance histograms of the "
                              "left and right cheek zones (1 = identical)",
    "NaturalColour": "distance of the cheeks' mean CIELAB (a, b) from a in [5, 25], "
                     "b in [5, 35] (100 when a or b < 0; 0 for a grey aligned face)",
    "InterEyeDistance": "eye-centre distance in image pixels / cos(yaw)",
    "HeadSize": "eye-midpoint-to-chin distance T / image height",
    "LeftwardCropOfTheFaceImage": "image-right eye centre x / inter-eye distance",
    "RightwardCropOfTheFaceImage": "(image width - image-left eye centre x) / inter-eye "
                                   "distance",
    "MarginAboveOfTheFaceImage": "eye-midpoint y / T (midpoint rounded to whole pixels, T "
                                 "from it to the chin)",
    "MarginBelowOfTheFaceImage": "(image height - eye-midpoint y) / T (as MarginAbove)",
    "SingleFacePresent": "second-largest / largest detected face box area (single "
                         "precision); 0 for one face",
    "HeadPoseYaw": "yaw in degrees (5-point pose of facecast.attributes.pose)",
    "HeadPosePitch": "pitch in degrees",
    "HeadPoseRoll": "roll in degrees",
    "EyesOpen": "smaller eye's largest lid opening / T (aligned landmarks)",
    "MouthClosed": "largest inner-lip opening / T",
}

APPROXIMATION = ("facecast's approximation of OFIQ (MTCNN/YuNet detector, dlib 68 landmarks, "
                 "308 px alignment, no occlusion mask): not conformant")


def column(component: str, native: bool = False) -> str:
    """Column of a component: ``ofiq_<Component>`` (0-100) or ``ofiq_<Component>_native``."""
    return f"ofiq_{component}_native" if native else f"ofiq_{component}"


def ofiq_columns(components: tuple[str, ...] = OFIQ_COMPONENTS) -> list[str]:
    """Every column of ``components``: the quality value, then the native one, per component."""
    return [c for comp in components for c in (column(comp), column(comp, True))]


def descriptions(source: str = "facecast") -> dict[str, str]:
    """Column -> description for the scorer's footer (``source`` facecast or ofiq)."""
    comps = OFIQ_COMPONENTS if source == "facecast" else REAL_OFIQ_COMPONENTS
    where = APPROXIMATION if source == "facecast" else "computed by OFIQ itself (ofiqpy)"
    out = {}
    for comp in comps:
        out[column(comp)] = f"OFIQ {comp} quality value 0-100 (higher = better); {where}"
        out[column(comp, True)] = (f"OFIQ {comp} native value: "
                                   f"{NATIVE_MEANING.get(comp, 'as OFIQ reports it')}")
    return out


def cround(x: np.ndarray) -> np.ndarray:
    """C++ ``std::round``: halves away from zero (NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def sigmoid(x: np.ndarray, x0: float, w: float) -> np.ndarray:
    """OFIQ's ``Sigmoid(x, x0, w) = 1 / (1 + exp((x0 - x) / w))`` (Measure.h), overflow-safe."""
    z = np.clip((x0 - np.asarray(x, dtype=np.float64)) / w, -700.0, 700.0)
    return 1.0 / (1.0 + np.exp(z))


def scalar_conversion(raw: np.ndarray, h: float = 100.0, a: float = 0.0, s: float = 1.0,
                      x0: float = 4.0, w: float = 0.7, rounded: bool = True) -> np.ndarray:
    """OFIQ's ``ScalarConversion`` (Measure.h): ``h (a + s sigmoid(raw; x0, w))``, rounded
    half away from zero, clamped to [0, 100]; NaN where ``raw`` is NaN."""
    q = h * (a + s * sigmoid(raw, x0, w))
    if rounded:
        q = cround(q)
    return np.clip(q, 0.0, 100.0)


def _clamped(q: np.ndarray) -> np.ndarray:
    return np.clip(cround(q), 0.0, 100.0)


def quality_value(component: str, native: np.ndarray) -> np.ndarray:
    """OFIQ's 0-100 quality value of ``component`` from its native values (vectorised);
    NaN in, NaN out. Raises KeyError for a component without a known mapping."""
    v = np.asarray(native, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if component in SIGMOIDS:
            h, a, s, x0, w = SIGMOIDS[component]
            arg = np.abs(v - 0.45) if component == "HeadSize" else v
            return scalar_conversion(arg, h, a, s, x0, w)
        if component == "LuminanceMean":
            return _clamped(100.0 * sigmoid(v, 0.2, 0.05) * (1.0 - sigmoid(v, 0.8, 0.05)))
        if component == "LuminanceVariance":
            return _clamped(100.0 * np.sin(60.0 * v / (60.0 * v + 1.0) * np.pi))
        if component == "OverExposurePrevention":
            return _clamped(1.0 / (v + 0.01))
        if component == "DynamicRange":
            return _clamped(12.5 * v)
        if component == "IlluminationUniformity":
            return _clamped(100.0 * np.power(v, 0.3))
        if component == "SingleFacePresent":  # float arithmetic, as SingleFacePresent.cpp
            f = v.astype(np.float32)
            return _clamped(np.float32(100.0) * (np.float32(1.0) - f))
        if component.startswith("HeadPose"):  # clamp the cosine, then square it
            c = np.maximum(0.0, np.cos(v * np.pi / 180.0))
            return _clamped(100.0 * (c * c))
    raise KeyError(f"no OFIQ mapping for component {component!r}")
