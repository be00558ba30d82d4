"""The house stays easy to walk (issue 24.3): the import graph of src/facecast points down.

Rooms are the top-level modules and packages of ``facecast``. The ground floor (the package
root, ``job_server``, then ``io``, ``config``, ``workflow_glue``, ``parallel``, then
``report``) imports no stage; a stage of ``facecast.STAGES`` imports the ground floor and
earlier stages only; ``cli`` is the roof. Every import statement counts, also those inside functions (a lazy import is still an
arrow). docs/CONTRIBUTING.md draws the same order.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from conftest import REPO

import facecast

SRC = REPO / "src" / "facecast"
GROUND = {"facecast": 0, "job_server": 1, "io": 2, "config": 2, "workflow_glue": 2,
          "parallel": 2, "report": 3}
ROOF = {"cli": 100}
MAX_ROOT_MODULES = 8
MAX_MODULE_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(module: str, node: ast.AST, is_pkg: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".")
        if not is_pkg:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    return [stem] + [f"{stem}.{a.name}" for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """module -> facecast modules it imports (anywhere in its body)."""
    mods = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(mod, node, path.name == "__init__.py"):
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target.startswith("facecast") and target != mod:
                    edges[mod].add(target)
    return edges


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "facecast"


def rank(name: str) -> int:
    if name in GROUND:
        return GROUND[name]
    if name in ROOF:
        return ROOF[name]
    assert name in facecast.STAGES, f"room {name!r} is neither ground, roof nor a stage"
    return 10 + facecast.STAGES.index(name)


def test_every_arrow_points_down():
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items() for b in targets
                    if room(a) != room(b) and rank(room(b)) >= rank(room(a)))
    assert upward == [], "imports that point up or sideways:\n" + "\n".join(upward)


def test_no_import_cycle():
    edges = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in _modules():
        if v not in index:
            visit(v)
    assert cycles == []


def test_stages_are_packages_and_every_room_is_placed():
    for stage in facecast.STAGES:
        assert (SRC / stage / "__init__.py").is_file(), stage
    rooms = {room(m) for m in _modules()}
    for r in rooms:
        rank(r)  # raises for a room nobody placed


def test_few_modules_at_the_package_root():
    root = sorted(p.name for p in SRC.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_modules_stay_small():
    big = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert big == {}, f"split these by what they do: {big}"


def test_contributing_draws_the_stage_order():
    text = (REPO / "docs" / "CONTRIBUTING.md").read_text(encoding="utf-8")
    positions = [text.find(f"`{stage}`") for stage in facecast.STAGES]
    assert all(p >= 0 for p in positions), "every stage is named in docs/CONTRIBUTING.md"
    assert positions == sorted(positions), "docs/CONTRIBUTING.md names the stages in order"
