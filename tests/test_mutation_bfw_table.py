"""Issue 51: the survivors of mutation testing in :mod:`facecast.fairness.bfw_table`.

The whole page of two models written out by hand: its line layout (blank lines, rules,
headings), the cells the other tests never print (a subgroup missing at a target, a
non-finite threshold, a NaN TAR or deviation, a subgroup without genuine pairs or with
exactly one, ``n * FMR`` exactly 1 and 1.5), the global rule's words (absent -> ``all``,
an unknown rule printed as it is, an unknown count of impostors), and what
:func:`write_bfw_table` reads and writes (absent columns, the index, provenance, ``ds``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facecast.fairness.bfw_table import COLUMNS, bfw_table, write_bfw_table
from facecast.io.parquet_io import read_parquet, read_provenance

NAN = np.nan


def _m1() -> pd.DataFrame:
    """No ``global_pairs`` column (rule ``all``); 12,345 global impostors. At 0.1: AF (100
    impostors, one genuine pair) and BM (15 impostors: 1.5 at 0.1, resolvable; no genuine
    pair; an infinite own threshold); at 0.01 only AF (100 x 0.01 = 1 exactly: resolvable)."""
    cols = ["target_fmr", "group", "n_impostor", "n_genuine", "n_failed",
            "n_impostor_global", "resolvable", "global_threshold", "group_threshold",
            "deviation_global", "deviation_group", "tar_global", "tar_group",
            "deviation_global_cv", "deviation_group_cv", "tar_global_cv", "tar_group_cv"]
    rows = [(0.1, "AF", 100, 1, 0, 12345, True, 0.5, 0.45678, 0.123, -0.05, 0.9, NAN,
             0.2, NAN, 0.8, 0.7),
            (0.1, "BM", 15, 0, 0, 12345, True, 0.5, np.inf, NAN, 0.0, 0.5, 0.25,
             -0.1, 0.3, 0.6, 0.6),
            (0.01, "AF", 100, 1, 0, 12345, True, 0.75, 0.7, 1.0, -1.0, 0.1, 0.2,
             NAN, NAN, NAN, NAN)]
    return pd.DataFrame(rows, columns=cols)


def _m2() -> pd.DataFrame:
    """One row; an unknown rule; no count of global impostors, no threshold, no
    cross-validated or FMR columns."""
    return pd.DataFrame([{"target_fmr": 0.05, "group": "WF", "global_pairs": "custom",
                          "n_impostor": 40, "n_genuine": 3, "n_failed": 1,
                          "n_impostor_global": NAN, "resolvable": True,
                          "global_threshold": NAN, "group_threshold": 0.3,
                          "deviation_global": 0.05, "deviation_group": -0.025,
                          "tar_global": 0.55, "tar_group": 0.65}])


INTRO = ("TAR: the share of a subgroup's genuine pairs accepted at the threshold set for the "
         "intended FMR, under one global threshold (above) and under the subgroup's own "
         "(below), as BFW's TAR-at-FAR table lists them; `Avg.` is their mean over the "
         "subgroups. Deviation from the intended FMR, `(FMR - intended) / intended` in %, "
         "of each subgroup's impostor pairs, as Robinson et al. (CVPRW 2020) report it; 0 = "
         "the intended FMR exactly. Cross-validated: each fold's pairs under thresholds "
         "fitted on the other folds. `n/a (k impostors)`: fewer than 1 / FMR impostor pairs "
         "to set the threshold.")

NA0, NAAVG = "n/a (0 genuine pairs)", "n/a (a subgroup is n/a)"
CV = ", cross-validated over the protocol's folds"
TAR_HEAD = "### TAR at the intended FMR: the global threshold (global) and the subgroup's own (own)"


def _dev_block(head: str, rows: list[str], groups: str) -> list[str]:
    n = groups.count("|") - 1
    return ["", head, "", f"| intended FMR | {groups[2:]}", "|---|" + "---|" * n, *rows]


PAGE = [
    "# BFW: per-subgroup thresholds (bfw)", "", INTRO, "",
    "## m1", "",
    "The global threshold is fitted on every impostor pair, pairs across subgroups too "
    "(`demographics.global_pairs: all`): 12,345 impostor pairs.", "",
    "### Thresholds (accept iff score >= threshold)", "",
    "| intended FMR | global | AF | BM |", "|---|---|---|---|",
    "| 0.1 | 0.5000 | 0.4568 | – |", "| 0.01 | 0.7500 | 0.7000 | – |",
    "", TAR_HEAD, "",
    "| subgroup | threshold | 0.1 | 0.01 |", "|---|---|---|---|",
    "| AF | global | 0.900 | 0.100 |", "| AF | own | – | 0.200 |",
    f"| BM | global | {NA0} | – |", f"| BM | own | {NA0} | – |",
    f"| Avg. | global | {NAAVG} | {NAAVG} |", f"| Avg. | own | {NAAVG} | {NAAVG} |",
    *_dev_block("### Deviation (%) under the global threshold",
                ["| 0.1 | +12.3 | – |", "| 0.01 | +100.0 | – |"], "| AF | BM |"),
    *_dev_block("### Deviation (%) under each subgroup's own threshold",
                ["| 0.1 | -5.0 | +0.0 |", "| 0.01 | -100.0 | – |"], "| AF | BM |"),
    "", f"### TAR at the intended FMR{CV}", "",
    "| subgroup | threshold | 0.1 | 0.01 |", "|---|---|---|---|",
    "| AF | global | 0.800 | – |", "| AF | own | 0.700 | – |",
    f"| BM | global | {NA0} | – |", f"| BM | own | {NA0} | – |",
    f"| Avg. | global | {NAAVG} | {NAAVG} |", f"| Avg. | own | {NAAVG} | {NAAVG} |",
    *_dev_block(f"### Deviation (%) under the global threshold{CV}",
                ["| 0.1 | +20.0 | -10.0 |", "| 0.01 | – | – |"], "| AF | BM |"),
    *_dev_block(f"### Deviation (%) under each subgroup's own threshold{CV}",
                ["| 0.1 | – | +30.0 |", "| 0.01 | – | – |"], "| AF | BM |"),
    "",
    "## m2", "",
    "The global threshold is fitted on custom (`demographics.global_pairs: custom`): its "
    "impostors.", "",
    "### Thresholds (accept iff score >= threshold)", "",
    "| intended FMR | global | WF |", "|---|---|---|", "| 0.05 | – | 0.3000 |",
    "", TAR_HEAD, "",
    "| subgroup | threshold | 0.05 |", "|---|---|---|",
    "| WF | global | 0.550 |", "| WF | own | 0.650 |",
    "| Avg. | global | 0.550 |", "| Avg. | own | 0.650 |",
    *_dev_block("### Deviation (%) under the global threshold", ["| 0.05 | +5.0 |"], "| WF |"),
    *_dev_block("### Deviation (%) under each subgroup's own threshold", ["| 0.05 | -2.5 |"],
                "| WF |"),
    "", ""]


def _write(tmp_path, **kw):
    paths = {}
    for name, frame in (("m1", _m1()), ("m2", _m2())):
        paths[name] = tmp_path / f"{name}.parquet"
        frame.to_parquet(paths[name])
    out = {k: tmp_path / f"{kw.get('ds', 'none')}.{k}" for k in ("parquet", "md", "html")}
    table = write_bfw_table(paths, out["parquet"], out["md"], out["html"], **kw)
    return table, out


def test_the_whole_page_line_by_line(tmp_path):
    _, out = _write(tmp_path, ds="bfw", provenance={"run": 7})
    assert out["md"].read_text().split("\n") == PAGE


def test_the_long_table_and_what_is_written(tmp_path):
    """Absent columns are float NaN, the rows numbered 0..n-1 across models, the model
    first; the Parquet carries the caller's provenance and ``stage: bfw_table``; without
    ``ds`` the heading's parentheses are empty; no model: the columns and no row."""
    table, out = _write(tmp_path, ds="bfw", provenance={"run": 7})
    assert list(table.columns) == COLUMNS
    assert table["model"].tolist() == ["m1", "m1", "m1", "m2"]
    assert table.index.equals(pd.RangeIndex(4))
    assert table["fmr_global"].dtype == np.float64 and table["fmr_global"].isna().all()
    assert table["tar_group_cv"].dtype == np.float64 and np.isnan(table["tar_group_cv"].iat[3])
    assert table["global_pairs"].isna().tolist() == [True, True, True, False]
    prov = read_provenance(out["parquet"])
    assert prov["stage"] == "bfw_table" and prov["run"] == 7
    pd.testing.assert_frame_equal(read_parquet(out["parquet"]), table, check_dtype=False)
    _, plain = _write(tmp_path)
    assert plain["md"].read_text().startswith("# BFW: per-subgroup thresholds ()\n")
    empty = bfw_table({})
    assert list(empty.columns) == COLUMNS and empty.empty
