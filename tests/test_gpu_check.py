"""benchmarks/gpu_check.sh on a CPU (issue 48 item 9): its plan fits the H200 budget, and
its smallest tier (``GPU_CHECK_SMOKE=1``) runs every step end to end here, so a broken
path, environment variable or budget fails CI before a GPU run is spent on it.

What each line of the summary says is pinned: the CPU parts PASS (fp32 batch invariance
under the stage's settings, the CUDA-marked tests' CPU parts), the figures only a GPU gives
are SKIP lines naming what the GPU run judges, and the counts of the closing line are the
script's own records (issue 48 item 8: the counts were once read back from a file ``tee``
was truncating).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
GPU_STEPS = ["setup", "invariance", "nvjpeg", "dlib", "consistency", "decode", "throughput",
             "compile", "tests", "pipeline_cpu", "pipeline_gpu", "compare"]


def run_check(tmp_path: Path, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
            "GPU_CHECK_WORK": str(tmp_path / "work"), "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


def test_the_gpu_plan_fits_the_budget(tmp_path):
    """Every step's expected H200 seconds are printed first, and they fit 450 s."""
    out = run_check(tmp_path, timeout=30, GPU_CHECK_PLAN="1")
    assert out.returncode == 0, out.stdout + out.stderr
    line = out.stdout.strip()
    assert line.startswith("plan (gpu tier, budget 450 s): setup 15 s, invariance 30 s,")
    steps = re.findall(r" (\w+) (\d+) s", line.split(":", 1)[1])
    assert [s for s, _ in steps] == GPU_STEPS
    total = sum(int(s) for _, s in steps)
    assert line.endswith(f"= {total} s") and total == 435 <= 450
    tight = run_check(tmp_path, timeout=30, GPU_CHECK_PLAN="1", GPU_CHECK_BUDGET="434")
    assert tight.returncode == 1 and tight.stdout.strip().endswith("= 435 s")
    off = run_check(tmp_path, timeout=30, GPU_CHECK_PLAN="1", GPU_CHECK_PIPELINE="off",
                    GPU_CHECK_ONLY="decode tests")
    assert off.stdout.strip() == "plan (gpu tier, budget 450 s): decode 30 s, tests 45 s = 75 s"


def test_without_a_gpu_it_stops_unless_allowed(tmp_path):
    out = run_check(tmp_path, timeout=60, GPU_CHECK_ONLY="decode")
    assert out.returncode == 1
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert summary[1].startswith("ERROR setup        NO CUDA DEVICE; torch ")
    assert summary[1].endswith("(GPU_CHECK_ALLOW_CPU=1 runs the CPU tier)")
    assert summary[2].startswith("==== 0 PASS, 1 FAIL/ERROR, 0 SKIP, 0 INFO in ")


@pytest.mark.timeout(600)
def test_smoke_tier_runs_every_step_on_the_cpu(tmp_path):
    out = run_check(tmp_path, timeout=540, GPU_CHECK_SMOKE="1")
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert out.returncode == 0, "\n".join(summary)
    assert "plan (smoke tier, budget 1800 s): setup 10 s, invariance 25 s," in out.stdout
    head, *lines, tail = summary
    assert head.startswith("==== facecast GPU check: no GPU, ") and "tier smoke" in head
    verdicts = [(ln[:5].strip(), ln[6:18].strip()) for ln in lines]
    assert verdicts == [
        ("INFO", "setup"), ("PASS", "invariance"), ("SKIP", "fp32_cuda"),
        ("SKIP", "nvjpeg"), ("SKIP", "dlib"), ("SKIP", "consistency"), ("INFO", "decode"),
        ("INFO", "throughput"), ("SKIP", "compile"), ("PASS", "tests")]
    text = dict(zip([v[1] for v in verdicts], lines, strict=True))
    assert "max |diff| vs batch 1 = 0.00e+00 (goal <= 1e-06)" in text["invariance"]
    assert "the GPU run judges fp32 on CUDA within 1e-6" in text["fp32_cuda"]
    assert "the GPU run judges nvJPEG's pixels" in text["nvjpeg"]
    assert "opencv pixels equal: PASS" in text["nvjpeg"]
    assert "the GPU run judges r100 fp16 compiled >= 16,000 faces/s" in text["compile"]
    assert re.search(r"batches per thread; os.cpu_count \d+, physical cores", text["decode"])
    assert "end to end" in text["throughput"] and "the GPU run judges >= 0.9" in text["throughput"]
    assert re.search(r"pytest -m cuda: \d+ passed", text["tests"])
    assert re.match(r"==== 2 PASS, 0 FAIL/ERROR, 5 SKIP, 3 INFO in \d+ s of 1800; ", tail)
    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert log.rstrip().endswith(tail)  # the same summary closes the log
    assert (tmp_path / "out" / "steps.tar.gz").stat().st_size > 0
