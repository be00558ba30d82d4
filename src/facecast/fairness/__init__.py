"""Fairness stage: demographic bias of face verification scores.

Modules, one job each:

- :mod:`~facecast.fairness.auc` — tie-correct rank AUC, grouped over many cells at once
  (optionally weighted, for the bootstrap).
- :mod:`~facecast.fairness.groups` — discretise attribute columns into protected groups and
  legitimate attribute values, majority-vote protected labels per identity, annotate pairs.
- :mod:`~facecast.fairness.bias` — the ChaLearn FairFace 2020 bias metric (Bias+, Bias-).
- :mod:`~facecast.fairness.threshold` — FMR/FNMR per group at a global threshold with
  binomial intervals; NIST ratios, FDR, GARBE, inequity rate.
- :mod:`~facecast.fairness.bootstrap` — identity-clustered bootstrap of TAR@FMR, Bias, FDR,
  GARBE.
- :mod:`~facecast.fairness.soft` — CAST's probabilistic inter-category accuracy.
- :mod:`~facecast.fairness.interchange` — challenge CSV import/export
  (``TEMPLATE_ID1,TEMPLATE_ID2,SCORE``).
- :mod:`~facecast.fairness.tables`, :mod:`~facecast.fairness.plots`,
  :mod:`~facecast.fairness.hardpairs` — readable outputs.
- :mod:`~facecast.fairness.stage` — what the Snakemake rules call.
"""
