"""Model-vs-model comparisons (issue 25, part 2): paired metrics, McNemar, Holm, ties."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from facecast.compare.paired import _weighted_auc, align, compare_pair, holm, mcnemar_exact
from facecast.compare.stage import run_compare
from facecast.evaluate.metrics import auc_score


def scored(n_ids: int = 60, per_id: int = 4, seed: int = 0, noise: float = 0.0,
           base_seed: int = 0) -> pd.DataFrame:
    """Genuine pairs of each identity + random impostors; ``noise`` blurs the scores."""
    rng = np.random.default_rng(base_seed)
    ia, ib = np.triu_indices(per_id, 1)
    gen = [(i * per_id + a, i * per_id + b) for i in range(n_ids) for a, b in zip(ia, ib, strict=True)]
    a = rng.integers(0, n_ids * per_id, 3000)
    b = rng.integers(0, n_ids * per_id, 3000)
    imp = [(x, y) for x, y in zip(a, b, strict=True) if x // per_id != y // per_id]
    pairs = np.array(gen + imp)
    label = np.r_[np.ones(len(gen), int), np.zeros(len(imp), int)]
    truth = np.where(label == 1, rng.normal(0.7, 0.1, len(label)),
                     rng.normal(0.2, 0.1, len(label)))
    s = truth + np.random.default_rng(seed).normal(0, noise, len(label)) if noise else truth
    return pd.DataFrame({"image_a": [f"i{x}" for x in pairs[:, 0]],
                         "image_b": [f"i{x}" for x in pairs[:, 1]],
                         "identity_a": (pairs[:, 0] // per_id).astype(str),
                         "identity_b": (pairs[:, 1] // per_id).astype(str),
                         "label": label, "score": s,
                         "fold": (np.arange(len(label)) % 10).astype(str)})


def test_exact_mcnemar_and_holm_by_hand() -> None:
    # b = 0, c = 5: 2 * 0.5^5
    assert np.isclose(mcnemar_exact(0, 5), 2 * 0.5 ** 5)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == 1.0
    assert np.allclose(holm(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])


def test_weighted_auc_with_unit_weights_is_the_auc() -> None:
    df = scored(noise=0.2, seed=4)
    s, y = df["score"].to_numpy(), df["label"].to_numpy()
    assert np.isclose(_weighted_auc(s, y, np.ones((1, len(s))))[0], auc_score(s, y))


def test_better_model_wins_and_identical_models_tie(tmp_path: Path) -> None:
    good, bad = scored(), scored(noise=0.25, seed=1)
    p = align(good, bad)
    table, mc = compare_pair(p, fars=[1e-2], fmr=1e-2, n_boot=100, seed=0)
    acc = table.set_index("metric").loc["accuracy"]
    assert acc["difference"] > 0 and acc["lo"] > 0 and acc["p_boot"] < 0.05
    assert mc["mcnemar_a_only"] > mc["mcnemar_b_only"] and mc["mcnemar_p"] < 0.05
    for name, frame in (("good", good), ("bad", bad), ("same", good.copy())):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    scores = {"b1": {m: tmp_path / f"{m}.parquet" for m in ("good", "bad", "same")}}
    diff = run_compare(scores, tmp_path / "out", {"n_boot": 100, "fmr": 1e-2}, fars=[1e-2],
                       seed=0)
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    ranks = dict(zip(board["model"], board["rank"], strict=True))
    assert ranks["good"] == ranks["same"] == 1 and ranks["bad"] == 3
    assert set(board["vs_above"].fillna("")) == {"", "tie", "better"}
    same = diff[(diff["model_a"] == "good") & (diff["model_b"] == "same")]
    assert (same["verdict"] == "tie").all() and (same["difference"] == 0).all()
    assert (tmp_path / "out" / "report.html").stat().st_size > 0


def test_plan_says_why_compare_and_slices_are_off() -> None:
    import yaml

    from facecast.config.prepare import resolve_config

    repo = Path(__file__).parents[1]
    cfg = yaml.safe_load((repo / "config.yaml").read_text())
    cfg["evaluate"]["models"] = ["dlib"]
    cfg["slices"] = "off"
    plan = resolve_config(cfg, str(repo / "workflow/schemas/config.schema.yaml"))
    assert "slices: off (slices.enabled: false)" in plan
    assert any(line.startswith("compare: skipped - fewer than two") for line in plan)
