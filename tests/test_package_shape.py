"""Every stage package has the same shape (issue 24.3): ``stage.py`` holds the functions
the rule scripts call, ``targets.py`` the pure functions the rule files call (file lists,
wildcard regexes, report() keywords), ``checks.py`` the config checks.

Rules and scripts stay thin: a script imports its entry from ``facecast.<stage>.stage``
(besides the ground floor: ``workflow_glue``, ``io``, ``report``); a rule file imports only
DAG-side code (``facecast.<stage>.targets`` / ``.checks``, ``io``, ``config``, ``report``),
so parsing the Snakefile loads no stage logic, and every rule keeps its ``log:``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import facecast

SRC = REPO / "src" / "facecast"
SCRIPTS = sorted((REPO / "scripts").glob("*.py"))
RULE_FILES = sorted((REPO / "workflow" / "rules").glob("*.smk"))
SHAPE = ("stage.py", "targets.py", "checks.py")
GROUND = ("facecast.io", "facecast.report", "facecast.config", "facecast.job_server",
          "facecast.workflow_glue")
#: rules of the ground floor, not of a stage: their script's entry and where it lives
GROUND_SCRIPTS = {"plan.py": ("facecast.report.plan", "write_plan"),
                  "shard_index.py": ("facecast.io.shard_index", "write_shard_index")}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _stage_module(module: str, kinds: tuple[str, ...]) -> bool:
    parts = module.split(".")
    return (len(parts) == 3 and parts[0] == "facecast" and parts[1] in facecast.STAGES
            and parts[2] in kinds)


def _imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every facecast import; ``from facecast.x import y`` where
    ``y`` is a submodule counts as an import of ``facecast.x.y``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if _within(a.name, "facecast")]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                _within(node.module, "facecast"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                path = SRC.parent.joinpath(*sub.split("."))
                if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
                    out.append((sub, []))
                else:
                    out.append((node.module, [a.name]))
    return out


def _smk_imports(path: Path) -> list[tuple[str, list[str]]]:
    """The facecast imports of a rule file (its top-level import statements)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    statements, i = [], 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^(import|from)\s+facecast\b", line):
            stmt = [line]
            while "(" in line and ")" not in stmt[-1]:
                i += 1
                stmt.append(lines[i])
            statements.append("\n".join(stmt))
        i += 1
    return _imports(ast.parse("\n".join(statements)))


@pytest.mark.parametrize("stage", facecast.STAGES)
def test_every_stage_has_stage_targets_and_checks(stage):
    missing = [name for name in SHAPE if not (SRC / stage / name).is_file()]
    assert missing == [], f"facecast.{stage} lacks {missing}"


def test_scripts_import_their_entry_from_a_stage_module():
    bad, no_entry = [], []
    for path in SCRIPTS:
        imports = _imports(ast.parse(path.read_text(encoding="utf-8")))
        for module, _ in imports:
            if not (_stage_module(module, ("stage",)) or module == "facecast.workflow_glue"
                    or _within(module, "facecast.io") or _within(module, "facecast.report")):
                bad.append(f"{path.name}: {module}")
        if path.name in GROUND_SCRIPTS:
            module, entry = GROUND_SCRIPTS[path.name]
            if (module, [entry]) not in imports:
                no_entry.append(f"{path.name}: expected {entry} from {module}")
        elif not any(_stage_module(m, ("stage",)) and names for m, names in imports):
            no_entry.append(f"{path.name}: no entry from a facecast.<stage>.stage module")
    assert bad == [], "scripts import stage logic past its stage.py:\n" + "\n".join(bad)
    assert no_entry == [], "\n".join(no_entry)


def test_rule_files_import_only_the_dag_side():
    bad = []
    seen = set()
    for path in [*RULE_FILES, REPO / "Snakefile"]:
        for module, _ in _smk_imports(path):
            seen.add(module)
            if not (_stage_module(module, ("targets", "checks"))
                    or any(_within(module, g) for g in GROUND)):
                bad.append(f"{path.name}: {module}")
    assert bad == [], "rule files import more than the DAG side:\n" + "\n".join(bad)
    # the rule files do read their file lists from the stages' targets modules
    assert {m for m in seen if _stage_module(m, ("targets",))}


def test_every_script_is_run_by_a_rule_and_every_rule_has_a_log():
    used, missing_log = set(), []
    for path in RULE_FILES:
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r'"\.\./\.\./scripts/([\w.]+\.py)"', text))
        blocks = re.split(r"^(?=(?:rule|checkpoint) \w+:)", text, flags=re.M)
        for block in blocks:
            head = re.match(r"(?:rule|checkpoint) (\w+):", block)
            if head and not re.search(r"^    log:", block, flags=re.M):
                missing_log.append(f"{path.name}: {head.group(1)}")
    assert missing_log == [], f"rules without log: {missing_log}"
    assert sorted(used) == sorted(p.name for p in SCRIPTS)


def test_targets_and_checks_load_no_heavy_stage_logic():
    """The Snakefile imports the targets and checks modules at every parse (cluster jobs
    too): they load no torch, no plotting and no stage entry module."""
    code = ("import importlib, sys, facecast\n"
            "for s in facecast.STAGES:\n"
            "    importlib.import_module(f'facecast.{s}.targets')\n"
            "    importlib.import_module(f'facecast.{s}.checks')\n"
            "heavy = ['torch', 'matplotlib'] + [f'facecast.{s}.stage' for s in facecast.STAGES]\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.strip()
    assert out == "[]"
