"""Simulated attribute tables and scored pairs with a planted bias (tests, benchmarks).

Identities get a sex (``label_male``), a skin tone (``label_skin_tone`` in [0, 1]) and an
age (``label_age``); images get glasses (``label_glasses``) and a yaw (``label_yaw``,
degrees). Genuine scores ~ N(0.6 + u_id, 0.12) with an identity offset u_id ~ N(0, 0.05),
lowered by ``effect`` for the ``hard_group`` (default dark-skinned women); impostor scores
~ N(0, 0.1). Deterministic from ``seed``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def simulate(n_identities: int = 120, images_per_identity: int = 6, impostor_ratio: float = 1.0,
             *, effect: float = 0.25, hard_group: tuple[int, int] = (0, 1),
             seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return ``(attributes, pairs)``.

    ``attributes``: ``image_id``, ``identity``, ``split``, ``exclude``, ``status`` and the
    ``label_*`` columns. ``pairs``: every genuine pair within each identity plus
    ``impostor_ratio`` times as many distinct random impostor pairs; evaluation layout
    (``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``, ``fold``,
    ``score``). ``hard_group`` = (male, dark) flags of the disadvantaged group.
    """
    rng = np.random.default_rng(seed)
    k = images_per_identity
    ident = np.repeat(np.arange(n_identities), k)
    male = rng.integers(0, 2, n_identities)
    tone = rng.uniform(0, 1, n_identities)
    age = rng.uniform(18, 80, n_identities)
    offset = rng.normal(0, 0.05, n_identities)
    n_img = n_identities * k
    names = np.array([f"id{i:05d}" for i in range(n_identities)], dtype=object)
    image_id = np.array([f"images/{names[i]}/{j}.jpg" for i in range(n_identities)
                         for j in range(k)], dtype=object)
    attributes = pd.DataFrame({
        "image_id": image_id, "identity": names[ident], "split": "test", "exclude": False,
        "status": "ok", "label_male": male[ident].astype(float),
        "label_skin_tone": tone[ident], "label_age": age[ident] + rng.normal(0, 1, n_img),
        "label_glasses": (rng.uniform(size=n_img) < 0.3).astype(float),
        "label_yaw": rng.normal(0, 20, n_img)})
    ia, ib = np.triu_indices(k, 1)
    base = (np.arange(n_identities) * k)[:, None]
    ga = (base + ia[None, :]).ravel()
    gb = (base + ib[None, :]).ravel()
    n_imp = int(round(impostor_ratio * ga.shape[0]))
    xa = rng.integers(0, n_img, 3 * n_imp + 10)
    xb = rng.integers(0, n_img, 3 * n_imp + 10)
    keep = ident[xa] != ident[xb]
    xa, xb = xa[keep], xb[keep]
    _, first = np.unique(np.minimum(xa, xb) * n_img + np.maximum(xa, xb), return_index=True)
    first = np.sort(first)[:n_imp]  # distinct unordered pairs, in drawing order
    xa, xb = xa[first], xb[first]
    a = np.concatenate([ga, xa])
    b = np.concatenate([gb, xb])
    label = np.concatenate([np.ones(ga.shape[0], int), np.zeros(xa.shape[0], int)])
    dark = tone > 0.5
    hard = (male == hard_group[0]) & (dark == bool(hard_group[1]))
    gen_mean = 0.6 + offset[ident[a]] - effect * hard[ident[a]]
    score = np.where(label == 1, rng.normal(gen_mean, 0.12), rng.normal(0.0, 0.1, a.shape[0]))
    pairs = pd.DataFrame({
        "image_a": image_id[a], "image_b": image_id[b], "identity_a": names[ident[a]],
        "identity_b": names[ident[b]], "label": label,
        "fold": (np.arange(a.shape[0]) % 10).astype(str), "score": score})
    return attributes, pairs
