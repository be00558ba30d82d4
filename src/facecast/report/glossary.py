"""The glossary every HTML page carries at its foot (issue #50 item 4).

:data:`GLOSSARY` is the Markdown of the terms the pages use; ``docs/reading.md`` holds the
same text (``tests/test_report_markdown.py`` fails when they differ), so the manual and
the pages say the same thing. :func:`glossary_html` renders it as a ``<section
id="glossary">`` that :func:`facecast.report.html_tables.html_page` appends to every page:
a page opened as a file, offline, moved or inside ``snakemake --report`` links its terms
to ``#glossary`` on the page itself.
"""

from __future__ import annotations

from functools import cache

from facecast.report.markdown import markdown_html

__all__ = ["ANCHOR", "GLOSSARY", "glossary_html"]

#: The id of the glossary section of every page.
ANCHOR = "glossary"

GLOSSARY = """\
### Groups, thresholds and which page says what

- **Group**: the protected values an image has, joined (`female_dark`), from the columns
  in `fairness.protected` - the dataset's labels (`label_*`) or an estimator's column.
- **Bins** (A0, G1, P0, S0 ...): a legitimate attribute cut at `bins`; `A0-A1` is a pair
  of one A0 and one A1 image. The fairness and quality-bias pages list the bins in
  their opening lines.
- **FMR / FNMR**: false match rate (impostor pairs accepted) and false non-match rate
  (genuine pairs rejected) at one threshold; TAR = 1 - FNMR.
- **Thresholds differ by page**: fairness at a target FMR (1e-3) on its reference pairs;
  slices at the EER of all searched pairs; mitigation at its own `mitigation.fmr` on its
  evaluated split. One group's FNMR differs between pages for that reason.
- **AUC** vs **accuracy**: AUC is the area under the ROC of all pairs; accuracy is the
  10-fold best-threshold accuracy (threshold chosen on nine folds, tested on the tenth).
- **n/a (reason)**: the data cannot support the figure; the reason says why.

### Fairness figures

- **d(a; x_L)**: the AUC gap of group a to the best group within one combination x_L of
  legitimate bins (FairFace 2020). Table A7: its mean per group; A8: how often a group is
  the most discriminated; A9-A14: per legitimate subset.
- **Bias+ / Bias-**: the largest minus the smallest mean d over groups, on genuine (+)
  or impostor (-) pairs; 0 = fair.
- **max/min**: the largest group rate over the smallest (NIST); 1 = fair.
- **FDR (fairness)**: 1 - (alpha A + (1 - alpha) B), A and B the largest FMR and FNMR gaps
  between groups (de Freitas Pereira & Marcel); 1 = fair. Not the false-discovery rate.
- **GARBE**: alpha Gini(FMRs) + (1 - alpha) Gini(FNMRs) (ISO/IEC 19795-10); 0 = fair.
- **False-discovery rate (slices, quality bias)**: the expected share of false findings
  among those reported, kept at `slices.fdr` by Benjamini-Hochberg (or -Yekutieli,
  `slices.fdr_method`); quality bias adjusts its p-values by Benjamini-Hochberg.

### Calibration and spread over groups

- **KS**: the Kolmogorov-Smirnov calibration error, the largest gap between the cumulative
  predicted match probability and the cumulative observed matches (FairCal); 0 = calibrated.
- **ECE**: expected calibration error, the mean gap between predicted and observed match
  rates over probability bins (`mitigation.ece_bins`); unlike KS it depends on the bins.
- **AAD / MAD / STD**: over groups, the average absolute deviation, maximum absolute
  deviation and standard deviation of a per-group figure (FairCal: of the groups' KS or
  FPR); RFW's STD is that of accuracy over its four sets.
- **SER**: skewed error ratio, the largest error over the smallest across groups (RFW);
  1 = equal errors.

### Intervals and tests

- **Identity-clustered interval**: pairs sharing a person are not independent, so
  identities (not pairs) are resampled with replacement (bootstrap), or the variance is
  summed over identities (Korn-Graubard, slices).
- **Holm**: step-down correction keeping the chance of any false significance at alpha
  over a table; a mark "after Holm" means the adjusted p is below alpha.
"""


@cache
def glossary_html() -> str:
    """The glossary section of a page: :data:`GLOSSARY` under a heading, id ``glossary``."""
    return (f'<section id="{ANCHOR}">\n<h2>Reading this page: glossary</h2>\n'
            + markdown_html("The same text is `docs/reading.md` of facecast.\n\n" + GLOSSARY)
            + "\n</section>")
