"""Issue 16.11: the same config gives byte-identical outputs, every file of them.

Two runs from scratch in two folders: the session's shared demo run (``demo_run``, every
stage on) and one more run of the same config here. Every file under ``results/`` must
be byte-identical: Parquet (data and provenance), PNG, SVG, PDF, Markdown, HTML, CSV,
TSV, text, lists and JSON. Only run records are left out: ``logs/`` and the ``runtime/``
benchmark timings. The cheap figure test below pins the SVG cause in one process pair.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import demo_test_config, run_snakemake

SKIP_DIRS = {"logs", "runtime"}

_FIGURE = """
import sys
from facecast.report.figures import pyplot, save_figure
plt = pyplot()
fig, ax = plt.subplots()
ax.plot([0, 1, 2], [2, 0, 1]); ax.imshow([[0, 1], [1, 0]]); ax.set_title("same")
save_figure(fig, [sys.argv[1] + "/f.svg", sys.argv[1] + "/f.pdf", sys.argv[1] + "/f.png",
                  sys.argv[1] + "/f.eps"])
"""


def test_figures_are_byte_identical_across_processes(tmp_path: Path) -> None:
    """SVG clip-path ids were random per process (matplotlib's svg.hashsalt)."""
    for k in (1, 2):
        (tmp_path / str(k)).mkdir()
        subprocess.run([sys.executable, "-c", _FIGURE, str(tmp_path / str(k))], check=True)
    for name in ("f.svg", "f.pdf", "f.png", "f.eps"):
        a, b = (tmp_path / "1" / name).read_bytes(), (tmp_path / "2" / name).read_bytes()
        assert a == b, f"{name} differs between two processes"
    assert b"clip-path" in (tmp_path / "1" / "f.svg").read_bytes()


_CHECKPOINT = """
import sys, torch
from facecast.io.atomic import atomic_path
with atomic_path(sys.argv[1] + "/checkpoint.pt") as tmp:
    torch.save({"w": torch.arange(4.0)}, tmp)
"""


def test_files_that_record_their_own_name_are_byte_identical(tmp_path: Path) -> None:
    """torch.save names its archive after the file: the temporary keeps the real name."""
    for k in (1, 2):
        subprocess.run([sys.executable, "-c", _CHECKPOINT, str(tmp_path / str(k))], check=True)
    a, b = (tmp_path / k / "checkpoint.pt" for k in ("1", "2"))
    assert a.read_bytes() == b.read_bytes()
    assert not (tmp_path / "1" / ".tmp").exists()  # temp folders removed


def result_files(workdir: Path) -> dict[str, Path]:
    """Every file under results/ (relative name -> path), logs and timings left out."""
    root = workdir / "results"
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not (set(rel.parts) & SKIP_DIRS) and ".tmp" not in rel.parts:
            out[rel.as_posix()] = p
    return out


def test_two_runs_give_byte_identical_files(demo_run, tmp_path: Path) -> None:
    first, cfg = demo_run
    assert cfg == demo_test_config()
    second = tmp_path / "second"
    run_snakemake(second, demo_test_config())
    a, b = result_files(first), result_files(second)
    assert sorted(a) == sorted(b), "the two runs wrote different sets of files"
    suffixes = {Path(name).suffix for name in a}
    assert {".parquet", ".png", ".svg", ".md", ".csv", ".tsv", ".txt"} <= suffixes, suffixes
    differ = [name for name in a if a[name].read_bytes() != b[name].read_bytes()]
    assert not differ, f"{len(differ)} of {len(a)} files differ, e.g. {differ[:15]}"
