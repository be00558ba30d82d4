"""A seeded open-set gallery/probe protocol built from a pool of images (ISO/IEC 19795-1).

From the pool (image ids with identities): identities are shuffled (seeded); a fraction
``heldout_fraction`` of them (at least one when the pool has two or more identities) is
held out of the gallery and supplies the non-mated probes; of the others (at most
``gallery_size`` identities; 0 = all) one image per identity is enrolled, and the rest of
their images are mated probes. ``max_probes_per_identity`` (0 = all) caps the probes an
identity contributes (mated and non-mated alike). Every pool image gets a row with its
``role``: ``gallery``, ``mated``, ``nonmated`` or ``unused`` (with the reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

ROLES = ("gallery", "mated", "nonmated", "unused")


def build_protocol(pool: pd.DataFrame, *, seed: int, heldout_fraction: float = 0.2,
                   gallery_size: int = 0, max_probes_per_identity: int = 0) -> pd.DataFrame:
    """Roles of every pool image (columns ``image_id``, ``identity``, ``role``,
    ``reason``); deterministic for a seed and a pool (row order does not matter)."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must lie in [0, 1), got {heldout_fraction}")
    df = pool[["image_id", "identity"]].astype(str).sort_values(
        ["identity", "image_id"], kind="stable").reset_index(drop=True)
    rng = np.random.default_rng(seed)
    ids = np.array(sorted(df["identity"].unique()), dtype=object)
    ids = ids[rng.permutation(ids.shape[0])]
    n_held = int(round(heldout_fraction * ids.shape[0]))
    if heldout_fraction > 0 and ids.shape[0] >= 2:
        n_held = max(n_held, 1)
    held = set(ids[:n_held])
    enrol = list(ids[n_held:])
    if gallery_size and gallery_size > 0:
        enrol = enrol[:gallery_size]
    enrolled = set(enrol)
    # a random order of images inside each identity: the first is enrolled
    key = rng.random(len(df))
    df["_key"] = key
    df = df.sort_values(["identity", "_key"], kind="stable")
    pos = df.groupby("identity", sort=False).cumcount().to_numpy()
    ident = df["identity"].to_numpy(object)
    in_gal = np.isin(ident, list(enrolled))
    in_held = np.isin(ident, list(held))
    role = np.full(len(df), "unused", dtype=object)
    reason = np.full(len(df), "identity beyond gallery_size", dtype=object)
    role[in_gal & (pos == 0)] = "gallery"
    reason[in_gal & (pos == 0)] = ""
    cap = int(max_probes_per_identity or 0)
    mated = in_gal & (pos >= 1) & ((pos <= cap) if cap else True)
    role[mated] = "mated"
    reason[mated] = ""
    reason[in_gal & (pos >= 1) & ~mated] = "over max_probes_per_identity"
    nonm = in_held & ((pos < cap) if cap else True)
    role[nonm] = "nonmated"
    reason[nonm] = ""
    reason[in_held & ~nonm] = "over max_probes_per_identity"
    out = df.drop(columns="_key").assign(role=role, reason=reason)
    return out.sort_values("image_id", kind="stable").reset_index(drop=True)


def protocol_counts(protocol: pd.DataFrame) -> Mapping[str, Any]:
    """Counts per role and identities of each kind."""
    c = protocol["role"].value_counts()
    return {"n_gallery": int(c.get("gallery", 0)), "n_mated": int(c.get("mated", 0)),
            "n_nonmated": int(c.get("nonmated", 0)), "n_unused": int(c.get("unused", 0)),
            "n_identities_nonmated": int(
                protocol.loc[protocol["role"] == "nonmated", "identity"].nunique())}
