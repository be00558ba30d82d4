"""Dataset adapters: a dataset layout in, raw manifest rows out.

Each adapter returns a DataFrame with ``path`` (relative to the dataset root, or as
given), ``identity`` and optionally ``split``, ``exclude``, ``status``/``message`` and
``label_*`` columns; :func:`facecast.datasets.manifest.finalize_manifest` does the rest.
:func:`facecast.datasets.stage.build_manifest` is the one entry point the ingest rule
calls.
"""
