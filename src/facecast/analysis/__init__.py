"""Attribute analysis: correlations, CAST filtering, C11 hard-pair mining, exports.

Modules: :mod:`~facecast.analysis.correlations` (streamed pairwise-complete Pearson and
Spearman, ranked pair tables, clustered heatmaps), :mod:`~.filtering` (CAST benchmark
subsets and ``description.txt``), :mod:`~.mining` (hard verification pairs in a score
band), :mod:`~.exports` (CAST ``.list`` files and an LFW-style ``pairs.txt``) and
:mod:`~.template_level` (IJB templates' attributes from their images': the one mean /
majority aggregation the templates stage's demographic groups use too).
"""
