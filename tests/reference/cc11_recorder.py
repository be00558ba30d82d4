"""Record how CAST's ``cc11.py`` cuts facecast's ``.bin`` exports, and CAST's list layout.

``record(checkout)`` (our code; nothing copied) takes, from a StevenZhou90/CAST checkout
outside this tree:

* ``cc11.py`` (a script): its module-level statements that name the eleven blocks
  (``names``, ``sub_benchmarks``), unpack the loaded dataset and cut it into blocks (the
  ``if isinstance(dataset, torch.Tensor):`` block), compiled from the file's own source.
  They run on each export of :data:`bin_inputs.EXPORTS` with stand-ins for what the
  script loads and calls: the dataset is a tensor of image indices (image ``i`` of the
  ``.bin`` = value ``i``) with the file's ``issame`` list; ``test`` (the model evaluation)
  and ``formatted_print`` only note what each block received and how it was labelled.
  Record ``cc11_slicing_<export>``: per block cc11.py's label, its image indices (first,
  count) and its ``issame`` slice.
* ``validation_sets/CC11/<set>/{0..9,val}.list``: the label layout of CAST's real lists
  (run lengths of the label column, in file order) - record ``cc11_lists``.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import bin_inputs
import numpy as np
from common import checkout_commit, write_record

REPO = "StevenZhou90/CAST"
CC11_PY = "cc11.py"
LISTS = "validation_sets/CC11"
#: the module-level assignments of cc11.py the slicing needs (besides the ``if`` block)
ASSIGNED = {"names", "sub_benchmarks", "acc_", "std_", "issame_list"}


def slicing_code(checkout: Path) -> Any:
    """cc11.py's statements that name and cut the blocks, compiled from its source."""
    path = checkout / CC11_PY
    tree = ast.parse(path.read_text(), filename=str(path))
    picked = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & ASSIGNED:
                picked.append(node)
        elif (isinstance(node, ast.If) and isinstance(node.test, ast.Call)
              and getattr(node.test.func, "id", None) == "isinstance"):
            picked.append(node)
    if len(picked) != len(ASSIGNED) + 1:
        raise KeyError(f"{path}: expected {sorted(ASSIGNED)} and the isinstance block, found "
                       f"{len(picked)} statements: update the recorder")
    return compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec")


def run_slicing(code: Any, n_images: int, issame: list[bool]) -> dict[str, Any]:
    """cc11.py's block loop on a dataset of ``n_images`` image indices: per block the
    label it printed, the image indices (first, count) and the issame slice it tested."""
    import torch

    seen: list[dict[str, Any]] = []
    labels: list[str] = []

    def test(data_set: tuple, model: Any, batch_size: int, nfolds: int = 10) -> tuple:
        images, same = data_set
        idx = images[:, 0].to(torch.int64).tolist()
        seen.append({"first_image": idx[0] if idx else None, "n_images": len(idx),
                     "consecutive": idx == list(range(idx[0], idx[0] + len(idx)))
                     if idx else True,
                     "issame": [bool(s) for s in same], "nfolds": nfolds})
        return 0.0, 0.0, 0.5, 0.0, 0.0

    def formatted_print(row_name: str, acc: float, std: float, sep: bool = False) -> None:
        labels.append(row_name)

    dataset = torch.arange(n_images, dtype=torch.float32).reshape(-1, 1)
    env = {"torch": torch, "np": np, "dataset": (dataset, list(issame)), "test": test,
           "formatted_print": formatted_print, "model": None,
           "args": SimpleNamespace(batch_size=256), "print": lambda *a, **k: None}
    exec(code, env)
    blocks = [{"label": lab, **s} for lab, s in zip(labels, seen, strict=False)]
    return {"sub_benchmarks": env["sub_benchmarks"], "names": env["names"],
            "sub_benchmark_size": env.get("sub_benchmark_size"), "blocks": blocks,
            "average_label": labels[len(seen)] if len(labels) > len(seen) else None}


def runs(labels: list[int]) -> list[list[int]]:
    """Run lengths of a label sequence: ``[[label, count], ...]`` in order."""
    out: list[list[int]] = []
    for lab in labels:
        if out and out[-1][0] == lab:
            out[-1][1] += 1
        else:
            out.append([lab, 1])
    return out


def list_layout(checkout: Path) -> dict[str, Any]:
    """Per CC11 set: the label runs of ``0.list`` .. ``9.list`` and ``val.list``."""
    out = {}
    for folder in sorted((checkout / LISTS).iterdir()):
        lists = {}
        for name in [*map(str, range(10)), "val"]:
            lines = (folder / f"{name}.list").read_text().splitlines()
            lists[name] = {"n_pairs": len(lines),
                           "runs": runs([int(x.split()[-1]) for x in lines if x.strip()])}
        out[folder.name] = lists
    return out


def record(checkout: Path) -> list[Path]:
    """The slicing records of every export, and the list layout record."""
    from facecast.datasets.insightface_bin import load_bin

    checkout = Path(checkout)
    commit = checkout_commit(checkout)
    code = slicing_code(checkout)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        run = bin_inputs.write_run(Path(tmp) / "run")
        for name in bin_inputs.EXPORTS:
            path, _ = bin_inputs.export(run, name)
            images, issame = load_bin(path)
            inputs = {"builder": "bin_inputs.write_run + bin_inputs.export", "export": name,
                      "benchmarks": bin_inputs.EXPORTS[name][0],
                      "settings": bin_inputs.EXPORTS[name][1],
                      "bin_sha256": bin_inputs.file_digest(path),
                      "dataset": "tensor of image indices (n_images x 1) and the file's "
                                 "issame list, standing in for load_bin's images"}
            written.append(write_record(
                "cc11", f"cc11_slicing_{name}", repo=REPO, commit=commit, path=CC11_PY,
                function="names, sub_benchmarks and the isinstance(dataset, torch.Tensor) "
                         "block loop (test and formatted_print stood in)",
                inputs=inputs, outputs=run_slicing(code, len(images), issame.tolist())))
    written.append(write_record(
        "cc11", "cc11_lists", repo=REPO, commit=commit, path=f"{LISTS}/*/{{0..9,val}}.list",
        function="the label column of each list file, as run lengths",
        inputs={"files": f"{LISTS}/<set>/<k>.list"}, outputs=list_layout(checkout)))
    return written
