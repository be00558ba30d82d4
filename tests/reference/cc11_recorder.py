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
* ``cc11.py``'s evaluation: the same statements, now with ``evaluation/evaluation.py``'s
  own ``test``, ``evaluate``, ``calculate_roc``, ``calculate_accuracy``, ``LFold``,
  ``calculate_val``, ``calculate_val_far``, ``distance_`` and ``formatted_print``
  (compiled from that file's source: importing it needs mxnet and cv2), on the fixed
  embeddings of :func:`cc11_inputs.graded`. The model is a stand-in that returns image
  ``i``'s recorded embedding for the dataset's value ``i`` (it undoes ``test``'s
  ``(x / 255 - 0.5) / 0.5``). Two shims, both ours and both outside what the record
  compares: the dataset tensor's ``.to('cuda')`` keeps it on the CPU (no GPU here), and
  ``interpolate.interp1d`` returns NaN where scipy >= 1.x refuses ``calculate_val``'s
  repeated FARs ("Expect x to not have duplicates") - ``test`` discards that TAR and
  returns only the 10-fold accuracy and its std. Record ``cc11_evaluation``: per block
  the accuracy and std (%, as cc11.py prints them), the average row, the printed lines
  and how often the interp1d shim answered.

Run ``python tests/reference/cc11_recorder.py /path/to/CAST`` to re-record only
``cc11_evaluation`` (``tests/reference/record.py --cast`` re-records every CAST record).
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import bin_inputs
import cc11_inputs
import numpy as np
from common import checkout_commit, write_record

REPO = "StevenZhou90/CAST"
CC11_PY = "cc11.py"
EVALUATION_PY = "evaluation/evaluation.py"
#: evaluation.py's definitions cc11.py's evaluation runs through
EVALUATION_DEFS = ["LFold", "calculate_roc", "calculate_accuracy", "distance_",
                   "calculate_val", "calculate_val_far", "evaluate", "test",
                   "formatted_print"]
#: cc11.py's batch size in the record: smaller than a block (test() slices
#: data[bb - batch_size: bb], which needs a block of at least one batch), and not a divisor
#: of the block's 120 images, so its last-batch arithmetic runs
BATCH_SIZE = 50
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


def evaluation_env(checkout: Path, shim_calls: list[str]) -> dict[str, Any]:
    """evaluation.py's definitions (:data:`EVALUATION_DEFS`), compiled from its source,
    with the libraries they call; ``interpolate.interp1d`` shimmed (module docstring),
    each time it answers NaN noted in ``shim_calls``."""
    import scipy.interpolate
    import sklearn
    import sklearn.preprocessing
    import torch
    from insightface_recorder import source_definitions
    from sklearn.decomposition import PCA
    from sklearn.model_selection import KFold

    def interp1d(x: Any, y: Any, **kwargs: Any) -> Any:
        try:
            return scipy.interpolate.interp1d(x, y, **kwargs)
        except ValueError as exc:
            shim_calls.append(str(exc))
            return lambda _: np.float64("nan")

    env = {"np": np, "sklearn": sklearn, "PCA": PCA, "KFold": KFold, "torch": torch,
           "datetime": __import__("datetime"), "math": __import__("math"),
           "interpolate": SimpleNamespace(interp1d=interp1d)}
    return source_definitions(checkout / EVALUATION_PY, EVALUATION_DEFS, env)


def run_evaluation(checkout: Path, embeddings: np.ndarray, issame: list[bool]
                   ) -> dict[str, Any]:
    """cc11.py's block loop with evaluation.py's own ``test`` and ``formatted_print`` on
    ``embeddings`` (image ``i`` = row ``i``): per block cc11.py's acc and std (%), the
    average it prints, its printed lines."""
    import torch

    class HostTensor(torch.Tensor):
        """The dataset: ``.to('cuda')`` stays on the CPU (the recorder has no GPU)."""

        def to(self, *args: Any, **kwargs: Any) -> Any:
            if args and str(args[0]).startswith("cuda"):
                return self
            return super().to(*args, **kwargs)

    table = torch.from_numpy(np.asarray(embeddings, np.float32))

    def model(img: Any) -> Any:
        value = (img[:, 0] * 0.5 + 0.5) * 255
        index = torch.round(value).to(torch.int64)
        if (value - index).abs().max() > 1e-3:
            raise ValueError("the model stand-in got values that are not image indices")
        return table[index.as_subclass(torch.Tensor)]

    shim_calls: list[str] = []
    printed: list[str] = []
    env = evaluation_env(checkout, shim_calls)
    env.update({"dataset": (torch.arange(len(embeddings), dtype=torch.float32)
                            .reshape(-1, 1).as_subclass(HostTensor), list(issame)),
                "model": model, "args": SimpleNamespace(batch_size=BATCH_SIZE),
                "print": lambda *a, **k: printed.append(" ".join(map(str, a)))})
    env["formatted_print"].__globals__["print"] = env["print"]
    exec(slicing_code(checkout), env)
    return {"acc": [float(a) for a in env["acc_"]], "std": [float(v) for v in env["std_"]],
            "average": [float(np.mean(env["acc_"])), float(np.mean(env["std_"]))],
            "printed": [line for line in printed if line.strip()],
            "interp1d_shim_answers": len(shim_calls),
            "interp1d_errors": sorted(set(shim_calls))}


def record_evaluation(checkout: Path) -> Path:
    """The ``cc11_evaluation`` record (module docstring)."""
    checkout = Path(checkout)
    issame, emb = cc11_inputs.graded()
    inputs = {"builder": "cc11_inputs.graded", "seed": cc11_inputs.SEED,
              "per_block": cc11_inputs.PER_BLOCK, "dim": cc11_inputs.DIM,
              "batch_size": BATCH_SIZE,
              "model": "stand-in returning image i's embedding for dataset value i",
              "shims": "dataset .to('cuda') stays on the CPU; interpolate.interp1d answers "
                       "NaN where scipy refuses calculate_val's repeated FARs (a TAR "
                       "test() discards)"}
    return write_record(
        "cc11", "cc11_evaluation", repo=REPO, commit=checkout_commit(checkout),
        path=f"{CC11_PY}, {EVALUATION_PY}",
        function="cc11.py's names, sub_benchmarks and block loop, with evaluation.py's "
                 "test / evaluate / calculate_roc / calculate_accuracy / LFold / "
                 "calculate_val / formatted_print",
        inputs=inputs, outputs=run_evaluation(checkout, emb, issame))


def record(checkout: Path) -> list[Path]:
    """The slicing records of every export, the list layout record and the evaluation
    record."""
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
    written.append(record_evaluation(checkout))
    return written


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit("usage: python tests/reference/cc11_recorder.py /path/to/CAST")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    print(f"cast: wrote {record_evaluation(Path(sys.argv[1]).resolve())}")
