"""What the label rules call (issue 14: attribute labels you can trust).

Entries (one per rule): :func:`run_audit` (``audit``: label metrics, contradictions, kappa,
ranked suspects; :mod:`facecast.labels.audit`), :func:`run_features_shard`
(``features_shard``: dlib 68-point landmarks and measurements of one faces shard) and
:func:`run_features_merge` (``features_merge``: identity shrinkage, percentiles,
reliability, prominent labels; both :mod:`facecast.labels.features`), and
:func:`run_describe` (``describe``: template descriptions and their rater-free evaluation;
:mod:`facecast.labels.describe`), and :func:`run_estimators` (``estimators``: the
estimator report of an attribute benchmark; :mod:`facecast.labels.estimators`). Which files
each writes: :mod:`facecast.labels.targets`.
"""

from __future__ import annotations

from facecast.labels.audit import run_audit
from facecast.labels.describe import run_describe
from facecast.labels.estimators_report import run_estimators
from facecast.labels.features import run_features_merge, run_features_shard

__all__ = ["run_audit", "run_describe", "run_estimators", "run_features_merge",
           "run_features_shard"]
