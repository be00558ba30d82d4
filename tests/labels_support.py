"""Generated label tables for the issue-14 tests (no images needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def truth_table(n_ids: int = 400, per_id: int = 8, seed: int = 0) -> pd.DataFrame:
    """A label table shaped like the generator's (identity-level and per-image labels)."""
    rng = np.random.default_rng(seed)
    male = (rng.random(n_ids) < 0.5).astype(float)
    dark = (rng.random(n_ids) < 0.5).astype(float)
    beard = male * (rng.random(n_ids) < 0.4)
    bald = male * (rng.random(n_ids) < 0.2)
    hair_long = (1 - bald) * (rng.random(n_ids) < np.where(male == 1, 0.12, 0.75))
    rep = np.repeat(np.arange(n_ids), per_id)
    n = rep.size
    return pd.DataFrame({
        "identity": [f"id{i:05d}" for i in rep], "label_male": male[rep],
        "label_dark_skin": dark[rep], "label_beard": beard[rep].astype(float),
        "label_bald": bald[rep].astype(float), "label_hair_long": hair_long[rep].astype(float),
        "label_glasses": (rng.random(n) < 0.4).astype(float),
        "label_hat": (rng.random(n) < 0.15).astype(float)})


def with_features(table: pd.DataFrame, attrs: list[str], noise: float = 0.6,
                  seed: int = 1) -> np.ndarray:
    """Simulated embeddings: one signal dimension per clean label plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    sig = np.stack([table[f"label_{a}"].to_numpy() * 2 - 1 for a in attrs], axis=1)
    extra = rng.normal(0, 1, (len(table), 4))
    return np.concatenate([sig + rng.normal(0, noise, sig.shape), extra], axis=1)
