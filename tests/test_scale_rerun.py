"""What reruns after a config change: only the stages downstream of the changed setting.

On a finished tiny-demo run (a copy of the session's reference run), ``snakemake -n``
with one setting changed must plan only the rules that depend on it; detection and
embedding (the GPU stages) and everything else upstream must stay done. With
``--rerun-triggers mtime input`` (docs/SCALE.md) the same edit plans nothing.
"""

from __future__ import annotations

import copy
import re
import shutil

import pytest
from scale_support import reference_run, run, scale_config, snakemake_cmd

UPSTREAM = {"synthetic_dataset", "manifest", "faces", "embed_fit", "embed",
            "attributes_score", "attributes_merge", "correlations", "dataset_summary"}
JOB_LINE = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):\s*$", re.M)


def planned_rules(workdir, config, *extra) -> set[str]:
    proc = run(snakemake_cmd(workdir, "-n", *extra, config=config))
    return set(JOB_LINE.findall(proc.stdout + proc.stderr)) - {"all"}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    work = tmp_path_factory.mktemp("rerun") / "w"
    shutil.copytree(ref, work, symlinks=True)  # copy2 keeps mtimes; metadata comes along
    return work


def _changed(section: str, key: str, value) -> dict:
    cfg = copy.deepcopy(scale_config())
    assert key in cfg[section], f"config has no {section}.{key}"
    cfg[section][key] = value
    return cfg


@pytest.mark.slow
def test_unchanged_config_plans_nothing(finished_run):
    assert planned_rules(finished_run, scale_config()) == set()


@pytest.mark.slow
@pytest.mark.parametrize(("section", "key", "value", "must_rerun"), [
    ("evaluate", "fars", [1.0e-3], {"evaluate_benchmark", "evaluate_summary"}),
    ("mining", "n_genuine", 9, {"mine_pairs", "evaluate_benchmark"}),
    ("fairness", "alpha", 0.25, {"fairness"}),
])
def test_evaluation_settings_rerun_only_downstream(finished_run, section, key, value,
                                                   must_rerun):
    cfg = _changed(section, key, value)
    planned = planned_rules(finished_run, cfg)
    assert must_rerun <= planned, planned
    assert not planned & UPSTREAM, f"{section}.{key} would rerun {planned & UPSTREAM}"
    # Rerun triggers without params: the same edit plans nothing.
    assert planned_rules(finished_run, cfg, "--rerun-triggers", "mtime", "input") == set()
