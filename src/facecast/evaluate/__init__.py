"""Verification evaluation: score pairs with an embedder, 10-fold accuracy, ROC/DET, summaries.

Modules: :mod:`~facecast.evaluate.metrics` (pure numpy metrics), :mod:`~.protocols`
(pair protocols: mined benchmarks, LFW ``pairs.txt``, CAST ``.list`` folders),
:mod:`~.scoring` (embeddings -> cosine scores), :mod:`~.plots`, :mod:`~.summary`
(models x benchmarks tables) and :mod:`~.stage` (what the rules call).
"""
