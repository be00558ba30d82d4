"""Parsing the Snakefile stays cheap: every Snakemake start (each `snakemake -n`, each SLURM
job and job step) imports what the Snakefile and the rule files import, and every stage's
``checks`` module (the config's defaults and checks). None of that may pull in a library the
config does not need: SciPy, torch, matplotlib, scikit-learn, tqdm, Pyro, OpenCV, ONNX Runtime
or scikit-image (SciPy and tqdm alone were ~0.11 s of each start, issue 49). pandas is still
imported there by several dataset modules (and by Snakemake's SLURM executor plugin).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

HEAVY = ("scipy", "torch", "matplotlib", "sklearn", "tqdm", "pyro", "cv2", "onnxruntime",
         "skimage", "torchvision", "facenet_pytorch", "dlib")
IMPORT = re.compile(r"^\s*(?:from|import) (facecast[\w.]*)", re.M)


def workflow_modules() -> list[str]:
    """The facecast modules the Snakefile and workflow/rules/*.smk import."""
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    return sorted({m for f in files for m in IMPORT.findall(f.read_text(encoding="utf-8"))})


def test_the_rule_files_import_facecast_modules():
    mods = workflow_modules()
    assert {"facecast.config.prepare", "facecast.config.check", "facecast.analysis.targets",
            "facecast.quality.targets"} <= set(mods), mods


def test_parsing_the_workflow_imports_no_heavy_library():
    code = (
        "import importlib, importlib.util, json, sys\n"
        "from facecast import STAGES\n"
        f"for m in {workflow_modules()!r}:\n"
        "    importlib.import_module(m)\n"
        "for s in STAGES:\n"
        "    for sub in ('checks', 'targets'):\n"
        "        if importlib.util.find_spec(f'facecast.{s}.{sub}'):\n"
        "            importlib.import_module(f'facecast.{s}.{sub}')\n"
        f"print(json.dumps(sorted(h for h in {HEAVY!r} if h in sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
