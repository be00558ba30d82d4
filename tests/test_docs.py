"""The documentation cannot drift from the config schema, the artifact contracts or the
file tree. Fast: reads text files only, runs no Snakemake.

Conventions the tests hold the docs to (written down for authors in docs/usage.md, "How
keys are written"):

- A config key is *documented* by a row of an *options table*: a Markdown table whose
  header's first two cells are ``key`` and ``default``, in ``docs/stages/*.md`` or
  ``docs/usage.md``. The row's first cell is exactly one backticked dotted key path.
- Key paths follow the schema's nesting: ``faces.detector``; an entry of a map whose
  names the user chooses is written ``<anything>`` (``datasets.<ds>.kind``,
  ``embed.models.<model>.backend``); the items of a list of objects are ``[]``
  (``benchmarks.<bench>.filters[].attribute``).
- Every schema key is documented exactly once, and every documented key is a schema key.
- Where the schema has a default, the row's default cell starts with that default as one
  backticked YAML value (``[0.6, 0.7, 0.7]``, ``""``); a key whose default the run derives
  (:data:`facecast.config.prepare.DERIVED_KEYS`) says ``derived`` instead.
- ``docs/output.md`` names every artifact path of ``docs/CONTRACTS.md`` (backticked
  ``results/...`` spans), and names no path that CONTRACTS does not cover, except the few
  in :data:`NOT_IN_CONTRACTS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from facecast import STAGES
from facecast.config.prepare import DERIVED_KEYS

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DOCS = REPO / "docs"
README = REPO / "README.md"
OUTPUT = DOCS / "output.md"
CONTRACTS = DOCS / "CONTRACTS.md"

README_MAX_LINES = 200
#: a user-named map entry in a key path: ``<ds>``, ``<model>``, ``<name>`` ...
PLACEHOLDER = re.compile(r"<[^<>/]*>")
#: a placeholder in an artifact path: ``{ds}`` or ``<identity>``
PATH_PLACEHOLDER = re.compile(r"\\\{[^{}/]*\\\}|<[^<>/]*>")

#: Paths docs/output.md names that docs/CONTRACTS.md does not (yet) cover, each with why
#: it is listed. A path added to CONTRACTS must leave this list (a test says so).
NOT_IN_CONTRACTS: dict[str, str] = {}


# ---------------------------------------------------------------- Markdown helpers


def _without_code_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line outside fenced code blocks."""
    out, fenced = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((no, line))
    return out


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a literal bar)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def options_rows(path: Path) -> Iterator[tuple[str, str, int]]:
    """``(key cell, default cell, line number)`` of every body row of every options table
    (header ``| key | default | ...``) in ``path``."""
    in_table = False
    for no, line in _without_code_blocks(path.read_text(encoding="utf-8")):
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        cells = _cells(line)
        if [c.lower() for c in cells[:2]] == ["key", "default"]:
            in_table = True
            continue
        if in_table and not set("".join(cells)) <= set("-: "):
            yield cells[0], (cells[1] if len(cells) > 1 else ""), no


def key_pages() -> list[Path]:
    """The pages whose options tables document config keys."""
    return sorted((DOCS / "stages").glob("*.md")) + [DOCS / "usage.md"]


def documented_keys() -> dict[str, list[tuple[str, str, str]]]:
    """Normalised key -> every ``(written key, default cell, "page:line")`` documenting it."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for page in key_pages():
        for cell, default, no in options_rows(page):
            m = re.fullmatch(r"`([^`]+)`", cell)
            where = f"{page.relative_to(REPO)}:{no}"
            assert m, f"{where}: an options row's first cell must be one backticked key, got {cell!r}"
            written = m.group(1)
            found.setdefault(normalise_key(written), []).append((written, default, where))
    return found


def normalise_key(key: str) -> str:
    """A key path with every map placeholder written ``<>``."""
    return PLACEHOLDER.sub("<>", key)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeats get GitHub's -1, -2 ...)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _without_code_blocks(path.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


# ---------------------------------------------------------------- the schema


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    """Follow local ``$ref`` pointers (``#/$defs/dataset``, ``#/properties/fairness/...``)."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def schema_keys(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every key path of the schema -> its (resolved) schema node: ``properties``
    recursively, the object schemas of ``additionalProperties`` (as ``<>``, maps whose
    entry names the user chooses) and of list ``items`` (as ``[]``)."""
    out: dict[str, dict[str, Any]] = {}

    def walk(node: Any, path: str) -> None:
        node = _resolve(schema, node)
        if not isinstance(node, dict):
            return
        for name, child in (node.get("properties") or {}).items():
            key = f"{path}.{name}" if path else name
            out[key] = _resolve(schema, child)
            walk(child, key)
        extra = _resolve(schema, node.get("additionalProperties"))
        if isinstance(extra, dict) and extra.get("properties"):
            walk(extra, f"{path}.<>")
        items = _resolve(schema, node.get("items"))
        if isinstance(items, dict) and items.get("properties"):
            walk(items, f"{path}[]")

    walk(schema, "")
    return out


@pytest.fixture(scope="module")
def schema() -> dict[str, dict[str, Any]]:
    return schema_keys(yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def documented() -> dict[str, list[tuple[str, str, str]]]:
    return documented_keys()


def test_schema_walk_reaches_maps_lists_and_refs(schema: dict[str, dict[str, Any]]) -> None:
    # the naming convention itself: a $ref'd map entry, a list item, an inline map entry
    assert "datasets.<>.synthetic.label_noise.group_noise.rate" in schema
    assert "fairness.protected.<>.column" in schema
    assert "benchmarks.<>.filters[].attribute" in schema
    assert "embed.models.<>.backend" in schema
    assert schema["faces.detector"]["default"] == "mtcnn"
    assert len(schema) > 300


def test_every_schema_key_is_documented(schema: dict[str, dict[str, Any]],
                                        documented: dict[str, list]) -> None:
    missing = sorted(set(schema) - set(documented))
    assert not missing, ("config keys without a row in an options table of docs/stages/*.md "
                         f"or docs/usage.md: {missing}")


def test_every_documented_key_is_in_the_schema(schema: dict[str, dict[str, Any]],
                                               documented: dict[str, list]) -> None:
    unknown = sorted(f"{rows[0][2]}: {rows[0][0]}" for key, rows in documented.items()
                     if key not in schema)
    assert not unknown, f"documented keys the schema does not have: {unknown}"


def test_each_key_is_documented_once(documented: dict[str, list]) -> None:
    twice = {key: [where for _, _, where in rows] for key, rows in documented.items()
             if len(rows) > 1}
    assert not twice, f"keys documented in more than one row: {twice}"


def test_documented_defaults_are_the_schema_defaults(schema: dict[str, dict[str, Any]],
                                                     documented: dict[str, list]) -> None:
    wrong = []
    for key, rows in documented.items():
        node = schema.get(key)
        if node is None:
            continue  # reported by test_every_documented_key_is_in_the_schema
        for written, cell, where in rows:
            if key in DERIVED_KEYS:
                if "derived" not in cell:
                    wrong.append(f"{where}: {written}: the default is derived from the run; "
                                 f"say 'derived', got {cell!r}")
                continue
            if "default" not in node:
                continue
            m = re.match(r"`([^`]*)`", cell)
            value = yaml.safe_load(m.group(1)) if m else "<no backticked default>"
            if value != node["default"]:
                wrong.append(f"{where}: {written}: schema default {node['default']!r}, "
                             f"documented {cell!r}")
    assert not wrong, "\n".join(wrong)


def test_the_options_parser_sees_a_real_table(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("| key | default | meaning |\n|---|---|---|\n"
                    "| `faces.select` | `largest` | a or b \\| c |\n\n"
                    "| scorer | columns |\n|---|---|\n| `native` | x |\n"
                    "```\n| key | default |\n| `in.code` | 1 |\n```\n")
    assert list(options_rows(page)) == [("`faces.select`", "`largest`", 3)]


def test_every_stage_has_a_page() -> None:
    pages = {p.stem for p in (DOCS / "stages").glob("*.md")}
    assert set(STAGES) <= pages, f"stages without docs/stages/<stage>.md: {set(STAGES) - pages}"


# ---------------------------------------------------------------- README and links


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}); the manual "
        "belongs in docs/")
    text = "\n".join(lines)
    for command in ("make demo", "make test"):
        assert command in text, f"README.md lost {command!r}"
    snakemake = [line for line in lines if line.lstrip().startswith("snakemake ")]
    for option in ("-n", "--cores", "--report"):
        assert any(option in line.split() for line in snakemake), (
            f"README.md's quick start lost its `snakemake ... {option}` command")
    assert "results/mine/plan.md" in text, "README.md no longer says where the plan is"


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(path: Path) -> Iterator[tuple[int, str]]:
    for no, line in _without_code_blocks(path.read_text(encoding="utf-8")):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            yield no, target


def test_relative_links_resolve() -> None:
    broken = []
    checked = 0
    for page in _markdown_files():
        for no, target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(REPO)}:{no}: {target}"
            checked += 1
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading with anchor #{anchor})")
    assert checked > 20, "the link scan found almost no links; is the pattern broken?"
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_slug_follows_github() -> None:
    assert slug("Faces: detection and alignment") == "faces-detection-and-alignment"
    assert slug("`faces.detector: none` speed") == "facesdetector-none-speed"
    assert slug("1:N identification (ISO/IEC 19795-1)") == "1n-identification-isoiec-19795-1"


# ---------------------------------------------------------------- output.md vs CONTRACTS


def _paths(path: Path) -> set[str]:
    """Backticked ``results/...`` spans of a Markdown file."""
    return set(re.findall(r"`(results/[^`\s]*)`", path.read_text(encoding="utf-8")))


def _pattern(path: str) -> tuple[re.Pattern[str], bool]:
    """A contract path as a regex (placeholders match one path segment) and whether it
    names a folder (``.../`` or ``.../...``), which covers the paths under it."""
    folder = path.endswith("/") or path.endswith("/...")
    path = path.removesuffix("...")
    regex = PATH_PLACEHOLDER.sub("[^/]+", re.escape(path))
    return re.compile(regex), folder


def covered(path: str, contracts: set[str]) -> bool:
    """Whether a contract path names ``path``, or a contract folder holds it (the bare
    dataset folder ``results/{ds}/`` holds everything, so it covers nothing)."""
    for c in contracts:
        regex, folder = _pattern(c)
        if regex.fullmatch(path):
            return True
        if folder and c != "results/{ds}/" and regex.match(path):
            return True
    return False


def test_output_md_names_every_contract_path() -> None:
    missing = sorted(_paths(CONTRACTS) - _paths(OUTPUT))
    assert not missing, f"docs/CONTRACTS.md paths docs/output.md does not name: {missing}"


def test_output_md_names_only_contract_paths() -> None:
    contracts = _paths(CONTRACTS)
    extra = set(NOT_IN_CONTRACTS)
    stray = sorted(p for p in _paths(OUTPUT)
                   if not covered(p, contracts) and not covered(p, extra))
    assert not stray, (f"docs/output.md names paths docs/CONTRACTS.md does not cover: {stray} "
                       "(add them to CONTRACTS, or fix the path)")


def test_not_in_contracts_is_still_true() -> None:
    contracts, named = _paths(CONTRACTS), _paths(OUTPUT)
    stale = sorted(p for p in NOT_IN_CONTRACTS if covered(p, contracts))
    assert not stale, f"now in docs/CONTRACTS.md, drop from NOT_IN_CONTRACTS: {stale}"
    unused = sorted(p for p in NOT_IN_CONTRACTS if p not in named)
    assert not unused, f"NOT_IN_CONTRACTS entries docs/output.md no longer names: {unused}"


def test_contract_path_matching() -> None:
    contracts = {"results/{ds}/eval/", "results/{ds}/protocols/{name}.parquet",
                 "results/{ds}/logs/...", "results/{ds}/"}
    assert covered("results/{ds}/protocols/pairs.parquet", contracts)
    assert covered("results/{ds}/eval/{model}/{bench}/roc.png", contracts)
    assert covered("results/{ds}/logs/faces/{shard}.log", contracts)
    assert not covered("results/{ds}/protocols/x/pairs.parquet", contracts)
    assert not covered("results/{ds}/invented.parquet", contracts)
