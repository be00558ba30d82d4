"""Issue 11 items 11 and 12 on a finished tiny run (the scale tests' tiny demo).

- Imported protocols join a finished run: a CAST folder with one numbered list (folds
  stratified) and one with ten; only their import/evaluation jobs run.
- Editing one ``evaluate.imports`` entry reruns only that protocol's evaluation
  (``snakemake -n`` lists no job of any other benchmark).
- ``snakemake --report`` shows the models x benchmarks table, the fairness report and the
  pair statistics as HTML tables: their numbers are in the rendered report.
"""

from __future__ import annotations

import base64
import copy
import re
import shutil
import urllib.parse

import pytest
from conftest import copy_workdir
from scale_support import reference_run, run, scale_config, snakemake_cmd

from facecast.io.parquet_io import read_parquet, read_provenance

JOB = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):\s*$", re.M)
WILDCARDS = re.compile(r"^\s*wildcards: (.*)$", re.M)


def _base_config() -> dict:
    """The scale tests' small every-stage config (what :func:`reference_run` ran): the
    imports are joined to that finished run, so nothing upstream has a reason to rerun."""
    return scale_config()


def _config(work, imports: dict) -> dict:
    cfg = _base_config()
    cfg["evaluate"]["imports"] = imports
    cfg["evaluate"]["benchmarks"] = list(cfg["evaluate"]["benchmarks"]) + list(imports)
    return cfg


def _lists(work):
    """Two imports from the mined lists: `one` = every test pair in one 0.list (genuine
    first, as CAST ships it) + val.list; `ten` = the ten files of another benchmark
    (`fair_pool`, the exhaustive one: every fold has pairs, whatever the machine; the tiny
    demo's `old` has one or two pairs per fold, and an empty fold is not a list file)."""
    bench = work / "results/demo/benchmarks"
    one, ten = work / "imports/one", work / "imports/ten"
    one.mkdir(parents=True)
    lines = [ln for k in range(10) for ln in (bench / f"random/{k}.list").read_text()
             .splitlines()]
    lines = [ln for ln in lines if ln.endswith(" 1")] + [ln for ln in lines if ln.endswith(" 0")]
    (one / "0.list").write_text("\n".join(lines) + "\n")
    shutil.copy(bench / "random/val.list", one / "val.list")
    shutil.copytree(bench / "fair_pool", ten, ignore=shutil.ignore_patterns(
        "*.parquet", "*.txt", "*.tsv", "*.png", "*.json", "*.html"))
    return {"one": {"format": "cast_lists", "path": str(one)},
            "ten": {"format": "cast_lists", "path": str(ten)}}


@pytest.fixture(scope="module")
def imported_run(tmp_path_factory):
    """A copy of the scale tests' finished tiny run (its config is :func:`_base_config`),
    then the imports joined to it."""
    work = copy_workdir(reference_run(tmp_path_factory),
                        tmp_path_factory.mktemp("eval_imports"))
    imports = _lists(work)
    cfg = _config(work, imports)
    proc = run(snakemake_cmd(work, config=cfg))
    jobs = set(JOB.findall(proc.stdout + proc.stderr))
    return work, cfg, jobs


@pytest.mark.slow
def test_imports_join_a_finished_run_with_stratified_folds(imported_run):
    work, cfg, jobs = imported_run
    assert {"import_protocol", "evaluate_benchmark", "evaluate_summary"} <= jobs
    assert not jobs & {"mine_pairs", "embed", "faces", "fairness"}, jobs
    note = read_provenance(work / "results/demo/protocols/one.parquet")["folds"]
    assert note.startswith("stratified by label and identity over 1 file (0), 10 folds")
    assert read_provenance(work / "results/demo/protocols/ten.parquet")["folds"] == \
        "from files 0..9"
    summary = read_parquet(work / "results/demo/eval/summary.parquet").set_index("benchmark")
    one = summary.loc[["one"]]  # a row per model (dlib, lbp)
    assert len(one) == 2 and (one["folds"] == note).all() and (one["n_folds"] == 10).all()
    md = (work / "results/demo/eval/summary.md").read_text()
    assert "| one | dlib |" in md and note in md


@pytest.mark.slow
def test_changing_one_import_reruns_only_its_evaluation(imported_run):
    work, cfg, _ = imported_run
    changed = copy.deepcopy(cfg)
    changed["evaluate"]["imports"]["one"]["datasets"] = ["demo"]  # same pairs, new params
    proc = run(snakemake_cmd(work, "-n", config=changed))
    out = proc.stdout + proc.stderr
    jobs = JOB.findall(out)
    assert "import_protocol" in jobs and "evaluate_benchmark" in jobs, out[-3000:]
    evaluated = [w for w in WILDCARDS.findall(out) if "bench=" in w]
    assert evaluated and all("bench=one" in w for w in evaluated), evaluated
    imported = [w for w in WILDCARDS.findall(out) if "proto=" in w]
    assert imported == ["ds=demo, proto=one"], imported
    assert not set(jobs) & {"mine_pairs", "fairness", "benchmark_subset"}, jobs
    # and an unrelated evaluate setting is a param of every evaluation job
    other = copy.deepcopy(cfg)
    other["evaluate"]["fars"] = [1e-2]
    out = run(snakemake_cmd(work, "-n", config=other)).stdout
    benches = {w.split("bench=")[1] for w in WILDCARDS.findall(out) if "bench=" in w}
    assert {"one", "ten", "random"} <= benches


def _report_text(html: str) -> str:
    """The report page plus every file it embeds (data URIs decoded)."""
    parts = [html]
    for m in re.finditer(r"data:[\w/+.-]*((?:;[^,;\"']*)*),([A-Za-z0-9+/=%._~-]+)", html):
        payload = m.group(2)
        try:
            raw = base64.b64decode(payload) if ";base64" in m.group(1) else \
                urllib.parse.unquote(payload).encode()
        except ValueError:
            continue
        parts.append(raw.decode("utf-8", "replace"))
    return "\n".join(parts)


@pytest.mark.slow
def test_report_shows_the_tables_as_html(imported_run, tmp_path):
    work, cfg, _ = imported_run
    out = tmp_path / "report.html"
    run(snakemake_cmd(work, "--report", str(out), config=cfg, cores=None))
    text = _report_text(out.read_text())
    # the models x benchmarks table (summary.html) with its numbers
    summary = read_parquet(work / "results/demo/eval/summary.parquet")
    one = summary[(summary["benchmark"] == "one") & (summary["model"] == "dlib")].iloc[0]
    acc = f"{100 * one['accuracy']:.2f} ± {100 * one['accuracy_std']:.2f}"
    assert "<h1>Verification summary</h1>" in text and acc in text
    assert "<td>one</td><td>dlib</td>" in text
    # the fairness report
    fair = read_parquet(work / "results/demo/fairness/dlib/fair_pool/summary.parquet")
    assert "<h1>Fairness: dlib on fair_pool</h1>" in text
    assert (f"<td>{fair['bias_pos'][0]:.4g}</td><td>{fair['bias_neg'][0]:.4g}</td>"
            f"<td>{fair['accuracy'][0]:.4g}</td><td>{fair['n_pairs'][0]}</td>") in text
    # a benchmark's pair statistics
    stats = (work / "results/demo/benchmarks/random/pair_stats.tsv").read_text().splitlines()
    head = stats[0].split("\t")
    all_row = dict(zip(head, [r for r in stats if r.startswith("all\t")][0].split("\t"),
                       strict=True))
    assert "Pairs per fold: random (demo)" in text
    assert f"<td>all</td><td>{all_row[head[1]]}</td><td>{all_row[head[2]]}</td>" in text
