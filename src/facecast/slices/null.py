"""Complete nulls for slice discovery, on real score structure: attributes that carry no
information about the errors, while everything that makes errors cluster stays.

- :func:`permute_identities` - whole identities' attribute vectors move together: each
  identity's images take another identity's images' attributes (image k of identity i
  the attributes of image k mod n of identity pi(i)). Scores, pairs and the identities'
  error clustering are untouched, and identity-level attributes stay constant within an
  identity, so a slice is still a set of whole identities: the null the identity-
  clustered test exists for (hard identities make errors cluster; a test that treats
  pairs as independent finds "effects" here).
- :func:`permute_scores` - scores shuffled within each label: also a complete null, but it
  removes the within-identity correlation of errors (an easier null).

With Benjamini-Hochberg at 0.05 the probability of any discovery under a complete null is
at most 0.05 (``benchmarks/slices_null.py`` estimates it over many seeds;
``tests/test_slices_null.py`` keeps a fast version).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import bdtrc

from facecast.slices.testing import adjust

#: attribute-table columns that stay with their image (which image it is, how it was
#: processed), never permuted
KEEP = ("image_id", "identity", "status", "exclude", "message", "split", "path", "shard")


def permute_identities(attributes: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``attributes`` with every identity's attribute rows taken from another identity
    (a random permutation of identities; see the module docstring)."""
    attrs = attributes.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    ident = attrs["identity"].astype(str).to_numpy()
    order = np.lexsort((attrs["image_id"].astype(str).to_numpy(), ident))
    ids, first, counts = np.unique(ident[order], return_index=True, return_counts=True)
    target = rng.permutation(len(ids))
    src = np.empty(len(attrs), np.int64)
    for k in range(len(ids)):
        mine = order[first[k]:first[k] + counts[k]]
        theirs = order[first[target[k]]:first[target[k]] + counts[target[k]]]
        src[mine] = theirs[np.arange(len(mine)) % len(theirs)]
    moved = [c for c in attrs.columns if c not in KEEP]
    out = attrs.copy()
    out[moved] = attrs[moved].to_numpy()[src] if moved else out[moved]
    for c in moved:
        out[c] = out[c].astype(attrs[c].dtype)
    return out


def permute_scores(pairs: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``pairs`` with the scores shuffled within each label."""
    rng = np.random.default_rng(seed)
    s = pairs["score"].to_numpy().copy()
    lab = pairs["label"].to_numpy()
    for value in np.unique(lab):
        idx = np.flatnonzero(lab == value)
        s[idx] = s[rng.permutation(idx)]
    return pairs.assign(score=s)


def naive_discoveries(result: Any, fdr: float = 0.05) -> int:
    """Discoveries a search would make with the binomial p alone, pairs taken as
    independent (each slice's errors against its error type's mean error rate, BH over the
    same family): the test the identity-clustered one replaces, kept to show that the null
    of :func:`permute_identities` does have clustered errors. ``result``: a
    :class:`facecast.slices.discover.SliceSearch`."""
    t = result.table
    p = np.ones(len(t))
    for etype, c in result.info["by_error"].items():
        m = (t["error_type"] == etype).to_numpy() & (t["score"] > 0).to_numpy()
        p[m] = bdtrc(t["errors"].to_numpy()[m] - 1, t["size"].to_numpy()[m], c["mean_error"])
    q = adjust(p, "bh", result.info["family"])
    return int(((q <= fdr) & (t["effect"].to_numpy() > 0)).sum())
