"""`snakemake --report` on the finished tiny demo: every category that ran is in it.

The expected categories come from the workflow itself: the Snakefile is parsed in a
subprocess and every output flagged ``report(..., category=...)`` of every rule that ran
(as the reference run printed) contributes its category. The report must list exactly
those, with the dataset summary (category "Dataset") always among them, and every
``.rst`` caption under workflow/report/ must be valid reStructuredText for Snakemake.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO
from scale_support import reference_run, run, snakefile, snakemake_cmd, write_config

EVERY_CATEGORY = {"Dataset", "Attributes", "Correlations", "Benchmarks", "Evaluation",
                  "Fairness"}
KEY_FILES = [
    "results/demo/report/dataset_summary.png", "results/demo/report/dataset_summary.tsv",
    "results/demo/report/attribute_distributions.png",
    "results/demo/correlations/pearson_heatmap.png",
    "results/demo/correlations/pearson_heatmap_thresholded.png",
    "results/demo/correlations/pearson_pairs_filtered.tsv",
    "results/demo/benchmarks/random/description.txt",
    "results/demo/benchmarks/random/pair_stats.tsv",
    "results/demo/benchmarks/random/pair_scores.png",
    "results/demo/eval/summary.md", "results/demo/eval/dlib/random/roc.png",
    "results/demo/eval/dlib/random/det.png",
    "results/demo/fairness/dlib/fair_pool/groups.csv",
    "results/demo/fairness/dlib/fair_pool/rates_vs_threshold.png",
]
JOB_LINE = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):\s*$", re.M)

CATEGORY_PROBE = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (ConfigSettings, OutputSettings, ResourceSettings,
                                      StorageSettings, WorkflowSettings)
snakefile, workdir, cfg = map(Path, sys.argv[1:4])
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(snakefile=snakefile, workdir=workdir,
                      config_settings=ConfigSettings(configfiles=[cfg]),
                      resource_settings=ResourceSettings(cores=1),
                      storage_settings=StorageSettings(), workflow_settings=WorkflowSettings())
    out = {}
    for rule in wf._workflow.rules:
        cats = {f.flags["report"].category for f in rule.output if "report" in f.flags}
        out[rule.name] = sorted(c or "Other" for c in cats)
print("CATEGORIES" + json.dumps(out))
"""


def report_categories(html: str) -> dict:
    """The ``categories`` object the Snakemake HTML report embeds (category -> subcats)."""
    m = re.search(r"var categories = (\{.*?\});?\s*\n", html)
    assert m, "no categories object in the report"
    return json.loads(m.group(1))


def declared_categories(workdir) -> dict[str, list[str]]:
    cfg = write_config(workdir)
    proc = subprocess.run([sys.executable, "-c", CATEGORY_PROBE, str(snakefile(workdir)),
                           str(workdir), str(cfg)], capture_output=True, text=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("CATEGORIES")]
    assert line, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(line[-1][len("CATEGORIES"):])


@pytest.mark.slow
def test_report_has_every_category_that_ran(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    ran = set(JOB_LINE.findall((ref / "run.log").read_text()))
    declared = declared_categories(ref)
    expected = {c for rule in ran for c in declared.get(rule, []) if "{" not in c}
    assert "Dataset" in expected, declared.get("dataset_summary")

    out = tmp_path_factory.mktemp("report") / "report.html"
    run(snakemake_cmd(ref, "--report", str(out), cores=None))
    html = out.read_text()
    cats = report_categories(html)
    assert set(cats) == expected, f"report {sorted(cats)} != ran {sorted(expected)}"
    # every stage the issue names is there, with its key figures and tables
    assert EVERY_CATEGORY <= set(cats), sorted(cats)
    listed = json.dumps(cats)
    for path in KEY_FILES:
        assert path in listed, f"{path} is not in the report"
    assert "Dataset summary of" in html  # the caption was rendered


def test_every_caption_renders_as_restructuredtext():
    from docutils.core import publish_parts
    from docutils.utils import Reporter

    captions = sorted((REPO / "workflow/report").glob("*.rst"))
    assert {"workflow.rst", "dataset_summary.rst"} <= {p.name for p in captions}
    for path in captions:
        text = re.sub(r"\{\{.*?\}\}", "x", path.read_text())  # Jinja fields
        parts = publish_parts(text, writer_name="html",
                              settings_overrides={"report_level": Reporter.WARNING_LEVEL,
                                                  "halt_level": Reporter.WARNING_LEVEL})
        assert parts["body"].strip(), path.name
        assert "mailto:" not in parts["body"], f"{path.name}: a@b turned into a mail link"
