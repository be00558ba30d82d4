"""docs/output.md lists every file the demo writes (issue 50, item 5): each file of the
session demo run is named by a row of the page - its path, or a folder row naming the
file (``bias.parquet/.csv``, ``leaderboard.md`` / ``.html``, ``<method>_matrix.parquet``,
a table stem such as ``summary``), or a folder row that names no file (everything below)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

OUTPUT = REPO / "docs" / "output.md"


def page_rows(text: str) -> list[tuple[str, str]]:
    """``(path, row text)`` for every path in the first cell of the page's tables."""
    out = []
    for line in text.splitlines():
        if line.startswith("| `results/"):
            for p in re.findall(r"`(results/[^`]+)`", line.split(" | ")[0]):
                out.append((p, line))
    return out


def _rx(s: str) -> str:
    rx = re.escape(s)
    rx = re.sub(r"\\\{[^}]*\\\}", "[^/]+", rx)
    rx = re.sub(r"<[^>]*>", "[^/]+", rx)
    return rx.replace(r"\.\.\.", ".*")


def named_files(text: str) -> list[str]:
    """Regexes of the file names a row names in backticks (``a.parquet/.csv`` is two,
    ``a.md`` / ``.html`` too; a bare stem matches any extension)."""
    out, prev = [], ""
    for tok in re.findall(r"`([^`\s]+)`", text):
        parts = tok.split("/.")
        first = parts[0].rsplit("/", 1)[-1]
        if first.startswith(".") and prev:
            first = prev + first
        stem = first.split(".")[0]
        if not stem:
            continue
        prev = stem
        out.append(_rx(first) if "." in first else _rx(stem) + r"(\.[\w.]+)?")
        out += [_rx(f"{stem}.{ext}") for ext in parts[1:]]
    return out


def documented(rel: str, rows: list[tuple[str, str]]) -> bool:
    """Whether a path under the work dir (``results/...``) is named by a row."""
    folder, _, base = rel.rpartition("/")
    for p, text in rows:
        if p.endswith(("/", "/...")):
            if not re.match(_rx(p.removesuffix("...")), rel):
                continue
            others = [t for t in re.findall(r"`([^`]+)`", text) if t != p]
            if not any("." in t for t in others):
                return True  # a folder row naming no file: everything below
            if any(re.fullmatch(n, base) for n in named_files(text)):
                return True
        elif re.fullmatch(_rx(p), rel) or (
                re.fullmatch(_rx(p.rpartition("/")[0]), folder)
                and any(re.fullmatch(n, base) for n in named_files(text))):
            return True
    return False


def undocumented(work: Path, page: str) -> list[str]:
    rows = page_rows(page)
    files = (f.relative_to(work).as_posix() for f in sorted((work / "results").rglob("*"))
             if f.is_file() and ".tmp" not in f.parts)
    return [f for f in files if not documented(f, rows)]


def test_the_matcher_on_a_small_tree(tmp_path):
    page = "\n".join([
        "| `results/{ds}/quality/{model}/{protocol}/` | `edc.parquet`, `bias.parquet/.csv`,"
        " `leaderboard.md` / `.html`, tables `summary`. |",
        "| `results/{ds}/correlations/` | `<method>_matrix.parquet`. |",
        "| `results/{ds}/runtime/` | Snakemake `benchmark:` files. |",
        "| `results/{ds}/eval/{model}/{bench}/roc.parquet` | points; `roc.png` draws them. |",
        "| `results/{ds}/benchmarks/{bench}/0.list` | `0.list` ... `9.list`. |"])
    named = ["quality/m/p/edc.parquet", "quality/m/p/bias.csv", "quality/m/p/leaderboard.html",
             "quality/m/p/summary.parquet", "correlations/pearson_matrix.parquet",
             "runtime/x/y.tsv", "eval/m/b/roc.parquet", "eval/m/b/roc.png",
             "benchmarks/b/0.list"]
    unnamed = ["quality/m/p/rejection.csv", "quality/m/p/bias.png",
               "correlations/pearson_pairs.tsv", "eval/m/b/det.png", "benchmarks/b/3.list",
               "eval/m/b/sub/roc.png"]
    for rel in named + unnamed:
        (tmp_path / "results/demo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "results/demo" / rel).write_text("x")
    assert undocumented(tmp_path, page) == sorted(f"results/demo/{r}" for r in unnamed)


def test_output_md_lists_every_file_of_the_demo(demo_run):
    work, _ = demo_run
    missing = undocumented(work, OUTPUT.read_text(encoding="utf-8"))
    assert not missing, f"files of the demo run docs/output.md does not name: {missing}"
