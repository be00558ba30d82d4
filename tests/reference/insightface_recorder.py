"""Record what insightface returns on our hostile inputs (our code; nothing copied).

``record(checkout)`` runs, from a deepinsight/insightface checkout outside this tree:

* ``recognition/arcface_torch/eval/verification.py``: its ``evaluate`` /
  ``calculate_roc`` (the 10-fold accuracy; ``calculate_val``'s TAR at FAR 1e-3) on the
  embeddings of :data:`bin_inputs.ROC_CASES` and :func:`bin_inputs.lfw_like`, and on the
  LBP embeddings of the images its ``load_bin`` reads from facecast's ``.bin`` exports
  (:data:`bin_inputs.EXPORTS`). The functions are taken from the file's own source
  (``ast``) and run with numpy / scikit-learn / scipy, since importing the module needs
  mxnet; ``load_bin`` itself runs in a second interpreter that has mxnet 1.9.1
  (``FACECAST_MXNET_PYTHON``, see :func:`mxnet_python`; :mod:`insightface_load_bin`).
* ``recognition/_evaluation_/ijb/ijb_11.py`` (a script): its ``x_labels``, its TAR table
  loop (ROC, flip, nearest point) with the plot and table replaced by stand-ins that only
  collect the row, on :func:`ijb_inputs.readout_cases`; and ``image2template_feature`` on
  :data:`ijb_inputs.POOLING_CASES`.

Records go to ``tests/data/reference/insightface/`` (:func:`common.write_record`).
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import bin_inputs
import ijb_inputs
import numpy as np
from common import checkout_commit, write_record

REPO = "deepinsight/insightface"
VERIFICATION = "recognition/arcface_torch/eval/verification.py"
IJB_11 = "recognition/_evaluation_/ijb/ijb_11.py"
MXNET_ENV = "FACECAST_MXNET_PYTHON"
HERE = Path(__file__).resolve().parent


def source_definitions(path: Path, names: list[str], env: dict[str, Any]) -> dict[str, Any]:
    """Execute the top-level ``def`` / ``class`` statements called ``names`` of the file at
    ``path`` (its own source, compiled under its own file name) in ``env``; KeyError
    naming what the file no longer defines."""
    tree = ast.parse(path.read_text(), filename=str(path))
    picked = [n for n in tree.body
              if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    missing = sorted(set(names) - {n.name for n in picked})
    if missing:
        raise KeyError(f"{path} defines no {missing}: update the recorder")
    exec(compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), env)
    return env


def verification_functions(checkout: Path) -> dict[str, Any]:
    """verification.py's evaluation functions, with the libraries they call."""
    import scipy.interpolate
    import sklearn
    import sklearn.preprocessing
    from sklearn.decomposition import PCA
    from sklearn.model_selection import KFold

    env = {"np": np, "sklearn": sklearn, "PCA": PCA, "KFold": KFold,
           "interpolate": scipy.interpolate}
    return source_definitions(checkout / VERIFICATION,
                              ["LFold", "calculate_roc", "calculate_accuracy",
                               "calculate_val", "calculate_val_far", "evaluate"], env)


def run_evaluate(fns: dict[str, Any], embeddings: np.ndarray, issame: np.ndarray
                 ) -> dict[str, Any]:
    """On interleaved embeddings: ``calculate_roc``'s per-fold accuracies on evaluate's
    grid (``np.arange(0, 4, 0.01)``), their mean and std (as ``test`` reports them);
    ``evaluate``'s TAR at FAR 1e-3 or its error (a fold without genuine pairs divides by
    zero; FARs repeated along the grid stop scipy's ``interp1d``); and, per test fold of
    ``LFold``, ``calculate_val_far(1.0, ...)`` or its error - where a fold without genuine
    or impostor pairs divides by zero."""
    issame = np.asarray(issame)
    e1, e2 = embeddings[0::2], embeddings[1::2]
    _, _, acc = fns["calculate_roc"](np.arange(0, 4, 0.01), e1, e2, issame, nrof_folds=10)
    try:
        _, _, _, val, val_std, far = fns["evaluate"](embeddings, issame, nrof_folds=10)
        tail = {"val": val, "val_std": val_std, "far": far, "error": None}
    except (ZeroDivisionError, ValueError) as exc:
        tail = {"error": f"{type(exc).__name__}: {exc}"}
    dist = np.sum(np.square(np.subtract(e1, e2)), 1)
    per_fold = []
    for _, test in fns["LFold"](n_splits=10, shuffle=False).split(np.arange(len(issame))):
        try:
            per_fold.append(list(fns["calculate_val_far"](1.0, dist[test], issame[test])))
        except ZeroDivisionError as exc:
            per_fold.append(f"{type(exc).__name__}: {exc}")
    return {"accuracy": acc, "mean": np.mean(acc), "std": np.std(acc), **tail,
            "val_far_per_fold": per_fold}


def interleave(e1: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """Pair k's embeddings at rows 2k and 2k+1 (verification.py's layout)."""
    out = np.empty((2 * len(e1), e1.shape[1]), e1.dtype)
    out[0::2], out[1::2] = e1, e2
    return out


def mxnet_python() -> list[str]:
    """The command of a Python that can import verification.py (mxnet 1.9.1), from
    ``FACECAST_MXNET_PYTHON``; SystemExit saying how to make one when it is unset."""
    cmd = os.environ.get(MXNET_ENV)
    if not cmd:
        raise SystemExit(
            f"{MXNET_ENV} is not set: insightface's load_bin needs mxnet 1.9.1 (numpy < 1.24). "
            "Make a Python 3.11 venv with `pip install numpy==1.23.5 'scipy<1.14' "
            "'scikit-learn<1.6' torch` and `pip install --no-deps mxnet==1.9.1`, then set "
            f"{MXNET_ENV}=/path/to/venv/bin/python (docs/CONTRIBUTING.md, Reference records)")
    return shlex.split(cmd)


def load_bins(checkout: Path, bins: list[Path], work: Path) -> dict[str, Any]:
    """Run insightface's load_bin on ``bins`` (:mod:`insightface_load_bin`); per stem its
    issame, image count, integrality and the decoded images (N x 3 x 112 x 112 uint8)."""
    cmd = [*mxnet_python(), str(HERE / "insightface_load_bin.py"), str(checkout), str(work),
           *map(str, bins)]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    out = json.loads((work / "load_bin.json").read_text())
    for stem in out:
        out[stem]["images"] = np.load(work / f"{stem}.npy")
    return out


def record_exports(checkout: Path, commit: str, fns: dict[str, Any]) -> list[Path]:
    """load_bin on every export of :data:`bin_inputs.EXPORTS`, then evaluate on the LBP
    embeddings of what it read (per block of the export's sidecar)."""
    with tempfile.TemporaryDirectory() as tmp:
        run = bin_inputs.write_run(Path(tmp) / "run")
        made = {name: bin_inputs.export(run, name) for name in bin_inputs.EXPORTS}
        read = load_bins(checkout, [p for p, _ in made.values()], Path(tmp))
        written = []
        for name, (path, meta) in made.items():
            got = read[path.stem]
            emb = bin_inputs.lbp_embed(np.transpose(got["images"], (0, 2, 3, 1)))
            blocks = {}
            for b in meta["blocks"]:
                lo, n = b["first_image"], 2 * b["n_pairs"]
                blocks[b["name"]] = run_evaluate(fns, emb[lo:lo + n],
                                                 np.asarray(got["issame"][lo // 2:(lo + n) // 2]))
            outputs = {"bin_sha256": bin_inputs.file_digest(path), "n_images": got["n_images"],
                       "integral": got["integral"], "issame": got["issame"],
                       "image_digests": [bin_inputs.image_digest(i) for i in got["images"]],
                       "blocks": blocks}
            inputs = {"builder": "bin_inputs.write_run + bin_inputs.export", "export": name,
                      "benchmarks": bin_inputs.EXPORTS[name][0],
                      "settings": bin_inputs.EXPORTS[name][1],
                      "seeds": {"crops": bin_inputs.CROP_SEED, "pairs": bin_inputs.PAIR_SEED,
                                "export": bin_inputs.EXPORT_SEED},
                      "embedding": "bin_inputs.lbp_embed of load_bin's images"}
            written.append(write_record(
                "insightface", f"load_bin_{name}", repo=REPO, commit=commit, path=VERIFICATION,
                function="load_bin(path, (112, 112)); evaluate(embeddings, issame) per block",
                inputs=inputs, outputs=outputs))
    return written


def record_roc_cases(commit: str, fns: dict[str, Any]) -> list[Path]:
    """evaluate on every :data:`bin_inputs.ROC_CASES` case and on the LFW-like set."""
    outputs = {}
    for name in bin_inputs.ROC_CASES:
        e1, e2, y = bin_inputs.roc_case(name)
        outputs[name] = run_evaluate(fns, interleave(e1, e2), y)
    issame, emb = bin_inputs.lfw_like()
    outputs["lfw_like"] = run_evaluate(fns, emb, issame)
    import scipy
    import sklearn

    inputs = {"builder": "bin_inputs.roc_case(name) (interleaved), bin_inputs.lfw_like()",
              "cases": bin_inputs.ROC_CASES, "thresholds": "evaluate's own grids",
              "scipy": scipy.__version__, "sklearn": sklearn.__version__}
    return [write_record("insightface", "evaluate_cases", repo=REPO, commit=commit,
                         path=VERIFICATION, function="evaluate(embeddings, issame, nrof_folds=10)",
                         inputs=inputs, outputs=outputs)]


class _Table:
    """Stand-in for the script's PrettyTable: keeps the rows."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []

    def add_row(self, row: list[str]) -> None:
        self.rows.append(list(row))


class _Plot:
    """Stand-in for matplotlib.pyplot in the TAR loop (it only draws)."""

    def plot(self, *args: Any, **kwargs: Any) -> None:
        return None


def ijb_script(checkout: Path) -> tuple[list, ast.Module, ast.Module]:
    """ijb_11.py's ``x_labels`` (evaluated) and its TAR-table loop, as compiled modules."""
    path = checkout / IJB_11
    tree = ast.parse(path.read_text(), filename=str(path))
    x_stmt = [n for n in tree.body if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == "x_labels" for t in n.targets)]
    loops = [n for n in tree.body if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
             and n.target.id == "method"]
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)
             and n.name == "image2template_feature"]
    if len(x_stmt) != 1 or len(loops) != 1 or len(funcs) != 1:
        raise KeyError(f"{path}: x_labels, the 'for method in methods' loop or "
                       "image2template_feature not found once: update the recorder")
    env: dict[str, Any] = {}
    exec(compile(ast.Module(body=x_stmt, type_ignores=[]), str(path), "exec"), env)
    return (env["x_labels"], ast.Module(body=loops, type_ignores=[]),
            ast.Module(body=funcs, type_ignores=[]))


def run_readout(loop: Any, scores: np.ndarray, labels: np.ndarray, fars: list[float]
                ) -> dict[str, Any]:
    """The script's TAR loop on one score set: the printed row, and per FAR the raw
    ``tpr[min_index]`` and ``fpr[min_index]`` (the loop run once per FAR)."""
    from sklearn.metrics import auc, roc_curve

    def run(x_labels: list[float]) -> dict[str, Any]:
        env = {"np": np, "roc_curve": roc_curve, "auc": auc, "plt": _Plot(),
               "methods": np.array(["facecast"]), "scores": {"facecast": scores},
               "label": labels, "colours": {"facecast": None}, "target": "IJBC",
               "x_labels": x_labels, "tpr_fpr_table": _Table()}
        exec(loop, env)
        return env

    row = run(list(fars))["tpr_fpr_table"].rows[0][1:]
    tar, far = [], []
    for x in fars:
        env = run([x])
        tar.append(env["tpr"][env["min_index"]])
        far.append(env["fpr"][env["min_index"]])
    return {"row": row, "tar": tar, "far_reached": far}


def record_ijb(checkout: Path, commit: str) -> list[Path]:
    """The TAR read-out and template pooling records of ijb_11.py."""
    import sklearn
    import sklearn.metrics
    import sklearn.preprocessing

    x_labels, loop_mod, func_mod = ijb_script(checkout)
    loop = compile(loop_mod, str(checkout / IJB_11), "exec")
    outputs = {"x_labels": x_labels,
               "cases": {name: run_readout(loop, s, y, fars) for name, (s, y, fars)
                         in ijb_inputs.readout_cases().items()}}
    inputs = {"builder": "ijb_inputs.readout_cases()", "sklearn": sklearn.__version__,
              "seeds": "hostile_<c>: c; large: 3; perfect_<k>: 100 + k; tiny_step: none",
              "fars": {"hostile": ijb_inputs.HOSTILE_FARS, "others": ijb_inputs.IJB_FARS,
                       "tiny_step": [0.1]}}
    written = [write_record("insightface", "ijb_readout", repo=REPO, commit=commit,
                            path=IJB_11, function="x_labels; the TAR table loop "
                            "(roc_curve, np.flipud, nearest FAR)", inputs=inputs,
                            outputs=outputs)]
    env = {"np": np, "sklearn": sklearn}
    exec(compile(func_mod, str(checkout / IJB_11), "exec"), env)
    pooled = {}
    for name in ijb_inputs.POOLING_CASES:
        case = ijb_inputs.pooling_case(name)
        feats, templates = env["image2template_feature"](case["img_feats"],
                                                         case["template_id"], case["media_id"])
        pooled[name] = {"templates": templates, "features": feats}
    written.append(write_record(
        "insightface", "ijb_pooling", repo=REPO, commit=commit, path=IJB_11,
        function="image2template_feature(img_feats, templates, medias)",
        inputs={"builder": "ijb_inputs.pooling_case(name)['img_feats'], template_id, "
                "media_id", "cases (seed, images, templates, dim)": ijb_inputs.POOLING_CASES},
        outputs=pooled))
    return written


def record(checkout: Path) -> list[Path]:
    """Every insightface record (module docstring)."""
    checkout = Path(checkout)
    commit = checkout_commit(checkout)
    fns = verification_functions(checkout)
    return [*record_roc_cases(commit, fns), *record_ijb(checkout, commit),
            *record_exports(checkout, commit, fns)]
