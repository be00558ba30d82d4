"""Attribute labels you can trust (issue 14): label audit, landmark features, descriptions.

Modules: :mod:`.agreement` (kappa / alpha),
:mod:`.rules` (contradictions), :mod:`.metrics` (per-attribute baselines and scores),
:mod:`.suspects` (ranked suspect labels), :mod:`.audit` (the ``audit`` stage),
:mod:`.landmarks` / :mod:`.measures` / :mod:`.features` (the ``features`` stage),
:mod:`.describe` (the ``describe`` stage), :mod:`.estimators` (the estimator report;
imported classifiers' predictions: :mod:`.estimator_imports`, checked by
:mod:`.imports_checks`); :mod:`.stage` (the rule entries),
:mod:`.targets` (the DAG side), :mod:`.checks` (``config_errors``). The demo's planted label
noise is :mod:`facecast.datasets.label_noise`.
"""
