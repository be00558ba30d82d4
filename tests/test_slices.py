"""Slice discovery (issue 25): enumeration and bounds, tests and FDR, the planted demo
effect, the null, the CLI and the config checks."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from facecast.analysis.filtering import parse_filters
from facecast.cli import main as cli_main
from facecast.config.check import ConfigError
from facecast.slices.discover import find_slices
from facecast.slices.predicates import build_predicates
from facecast.slices.search import enumerate_slices, pair_masks, score, score_upper_bound
from facecast.slices.testing import adjust

DATA = Path(__file__).parent / "data" / "slices"


def planted(n_ids: int = 80, per_id: int = 5, seed: int = 0, effect: float = 0.25
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identities with two binary traits, a continuous per-image one and a noise column;
    genuine scores of identities with a = 1 and b = 1 are lower by ``effect``."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n_ids), per_id)
    a = rng.integers(0, 2, n_ids)[ids]
    b = rng.integers(0, 2, n_ids)[ids]
    attrs = pd.DataFrame({"image_id": [f"i{k}" for k in range(len(ids))],
                          "identity": ids.astype(str), "status": "ok", "exclude": False,
                          "a": a.astype(float), "b": b.astype(float),
                          "c": rng.normal(size=len(ids)), "noise": rng.uniform(size=len(ids))})
    rows = []
    for i in range(n_ids):
        imgs = np.flatnonzero(ids == i)
        for x, y in itertools.combinations(imgs, 2):
            rows.append((x, y, 1))
    gen = np.array(rows)
    imp_a = rng.integers(0, len(ids), 4000)
    imp_b = rng.integers(0, len(ids), 4000)
    keep = ids[imp_a] != ids[imp_b]
    imp = np.stack([imp_a[keep], imp_b[keep], np.zeros(keep.sum(), int)], 1)
    allp = np.vstack([gen, imp])
    label = allp[:, 2]
    s = np.where(label == 1, rng.normal(0.6, 0.1, len(allp)), rng.normal(0.2, 0.1, len(allp)))
    hit = (a[allp[:, 0]] == 1) & (b[allp[:, 0]] == 1) & (label == 1)
    s[hit] -= effect
    pairs = pd.DataFrame({"image_a": attrs["image_id"].to_numpy()[allp[:, 0]],
                          "image_b": attrs["image_id"].to_numpy()[allp[:, 1]],
                          "identity_a": ids[allp[:, 0]].astype(str),
                          "identity_b": ids[allp[:, 1]].astype(str),
                          "label": label, "score": s})
    return pairs, attrs


def test_adjust_is_benjamini_hochberg_and_yekutieli() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.5])
    bh = np.array([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.allclose(adjust(p, "bh"), bh)
    assert np.allclose(adjust(p, "by"), np.minimum(bh * (1 + 1 / 2 + 1 / 3 + 1 / 4), 1))


def test_lattice_counts_match_brute_force_and_bounds_hold() -> None:
    pairs, attrs = planted(n_ids=30, per_id=4, seed=3)
    pool = np.ones(len(attrs), bool)
    preds, masks = build_predicates(attrs, ["a", "b", "c", "noise"], pool, {"bins": 4})
    idx = pd.Index(attrs["image_id"])
    gen = pairs[pairs["label"] == 1]
    ia, ib = idx.get_indexer(gen["image_a"]), idx.get_indexer(gen["image_b"])
    err = gen["score"].to_numpy() < 0.5
    col = np.array([["a", "b", "c", "noise"].index(p.column) for p in preds])
    lat = enumerate_slices(masks, col, ia, ib, err, max_depth=3, min_support=3, alpha=0.95)
    q = pair_masks(masks, ia, ib)
    n, mean = len(err), err.mean()
    for d, size, e in zip(lat.defs, lat.size, lat.errors, strict=True):
        m = q[:, [p for p in d if p >= 0]].all(1)
        assert size == m.sum() and e == (m & err).sum()
    # SliceLine's bound over two parents is never below the child's score
    depth2 = lat.defs[lat.depth == 2]
    s1 = lat.size[lat.depth == 1]
    e1 = lat.errors[lat.depth == 1]
    ub = score_upper_bound(np.minimum(s1[depth2[:, 0]], s1[depth2[:, 1]]),
                           np.minimum(e1[depth2[:, 0]], e1[depth2[:, 1]]), n, mean, 0.95, 3)
    sc = score(lat.errors[lat.depth == 2], lat.size[lat.depth == 2], n, mean, 0.95)
    ok = lat.size[lat.depth == 2] >= 3
    assert (ub[ok] >= sc[ok] - 1e-12).all()
    assert (lat.depth == 3).any() and lat.counts["pruned"] > 0


def test_planted_conjunction_is_the_top_slice_and_exports_as_filters() -> None:
    pairs, attrs = planted()
    cfg = {"threshold": {"policy": "eer"}, "n_boot": 200, "exclude": ["identity"]}
    table, info, _, _ = find_slices(pairs, attrs, cfg, seed=1)
    top = table[table["rank"] == 1].iloc[0]
    assert set(top["columns"].split(" & ")) == {"a", "b"}
    assert "a = 1" in top["slice"] and "b = 1" in top["slice"]
    assert top["error_lo"] > top["rest_rate"] and top["q"] <= 0.05
    # the exported definition is a valid benchmark filter list
    assert len(parse_filters(top["definition"], "x")) == 2
    # noise alone never comes out significant
    assert not table.loc[table["columns"] == "noise", "significant"].any()
    assert info["tested"] <= info["family"] <= info["evaluated"]


def _demo(model: str = "dlib") -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.read_parquet(DATA / f"{model}_fair_pool.parquet"),
            pd.read_parquet(DATA / "attributes.parquet"))


DEMO_CFG = {"exclude": ["label_low_contrast_group"], "threshold": {"policy": "eer"},
            "n_boot": 200}


def test_demo_dlib_top_slice_is_skin_tone_and_sex() -> None:
    """The planted low-contrast group (dark-skinned women), its indicator excluded, every
    other attribute and label column searched (the demo config's slices section)."""
    pairs, attrs = _demo()
    table, info, _, _ = find_slices(pairs, attrs, {**DEMO_CFG, "n_boot": 100}, seed=20231)
    top = table[table["rank"] == 1].iloc[0]
    cols = set(top["columns"].split(" & "))
    assert len(cols & {"label_skin_tone", "label_dark_skin"}) == 1, top["slice"]
    assert len(cols & {"label_male", "label_noisy_male", "age_gender_male"}) == 1, top["slice"]
    assert "= 0" in top["slice"].split("male")[1][:4], top["slice"]  # women
    assert bool(top["significant"]) and not bool(top["redundant"]) and top["q"] < 1e-3
    assert top["error_lo"] > info["mean_error"]


def _permuted(pairs: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = pairs["score"].to_numpy().copy()
    for lab in (0, 1):
        idx = np.flatnonzero(pairs["label"].to_numpy() == lab)
        s[idx] = s[rng.permutation(idx)]
    return pairs.assign(score=s)


def test_null_demo_scores_permuted_within_label_discover_nothing() -> None:
    """dlib's demo scores permuted within each label: every slice is null; no run may
    report a discovery (labels columns, depth 2, several seeds)."""
    pairs, attrs = _demo()
    cfg = {**DEMO_CFG, "columns": ["label_*"], "n_boot": 50}
    for seed in range(4):
        table, info, _, _ = find_slices(_permuted(pairs, seed), attrs, cfg, seed=seed)
        assert info["family"] > 1000
        assert not table["significant"].any(), table.loc[table["significant"], "slice"]


def test_null_fdr_over_many_seeds_stays_at_most_005() -> None:
    """No planted effect: the share of runs with any discovery (the FDR under the
    complete null) over 30 seeds is at most 0.05."""
    runs, with_discovery = 30, 0
    for seed in range(runs):
        pairs, attrs = planted(n_ids=40, per_id=4, seed=seed, effect=0.0)
        table, _, _, _ = find_slices(pairs, attrs, {"threshold": {"policy": "eer"},
                                                    "n_boot": 50, "min_genuine": 10},
                                     seed=seed)
        with_discovery += bool(table["significant"].any())
    assert with_discovery / runs <= 0.05


def test_cli_writes_every_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pairs, attrs = planted(n_ids=40, per_id=4)
    pairs.drop(columns=["identity_a", "identity_b"]).to_parquet(tmp_path / "p.parquet")
    attrs.to_parquet(tmp_path / "a.parquet")
    rc = cli_main(["slices", "--pairs", str(tmp_path / "p.parquet"), "--attributes",
                   str(tmp_path / "a.parquet"), "--out", str(tmp_path / "out"),
                   "--policy", "eer", "--n-boot", "50", "--fdr", "0.1"])
    assert rc == 0
    out = tmp_path / "out"
    for name in ("slices.parquet", "slices.csv", "discovered.yaml", "search.json",
                 "report.html", "slices.png", "examples.png"):
        assert (out / name).stat().st_size > 0, name
    disc = yaml.safe_load((out / "discovered.yaml").read_text())
    for name, bench in disc["benchmarks"].items():
        assert name.startswith("slice_model_pairs_")
        parse_filters(bench["filters"], name)
    assert "significant slices" in capsys.readouterr().out


def test_config_mistakes_name_the_key() -> None:
    from facecast.config.check import check_config
    from facecast.config.prepare import resolve_config

    cfg = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())
    cfg["slices"] = {"columns": ["no_such_column*"], "models": ["nope"]}
    resolve_config(cfg, str(Path(__file__).parents[1] / "workflow/schemas/config.schema.yaml"))
    with pytest.raises(ConfigError) as exc:
        check_config(cfg)
    text = str(exc.value)
    assert "slices.columns: 'no_such_column*'" in text and "slices.models: 'nope'" in text


def test_predicates_select_what_their_exported_filters_select() -> None:
    from facecast.analysis.filtering import AttributeFilter, filter_mask

    _, attrs = planted(n_ids=20, per_id=4, seed=5)
    pool = np.ones(len(attrs), bool)
    pool[::7] = False  # images outside the pool never satisfy a predicate
    preds, masks = build_predicates(attrs, ["a", "c", "noise"], pool,
                                    {"bins": 4, "rank_ranges": True})
    assert len({p.text for p in preds}) == len(preds) and len(preds) == 2 + 9 + 9
    for k, p in enumerate(preds):
        want = filter_mask(attrs[p.column].to_numpy(), pool, AttributeFilter.from_config(p.filter))
        assert np.array_equal(masks[:, k], want), p.text


def test_fmr_slices_and_depth_three_run_and_flag_unresolvable_fmr() -> None:
    pairs, attrs = planted(n_ids=40, per_id=4, seed=2)
    cfg = {"error": "fmr", "threshold": {"policy": "fmr", "value": 1e-2}, "n_boot": 50,
           "max_depth": 3, "min_impostor": 20, "min_genuine": 5, "fdr_method": "by"}
    table, info, _, _ = find_slices(pairs, attrs, cfg, seed=0)
    assert info["error_type"] == "fmr" and (table["error_type"] == "fmr").all()
    assert table["depth"].max() == 3 and (table["q"] >= table["p"]).all()
    tested = table[table["tested"]]
    # a tested slice with fewer than 1/FMR impostor pairs says its FMR means nothing
    small = tested[tested["n_impostor"] < 100]
    assert len(small) > 0
    assert (~small["fmr_resolvable"]).all() and small["note"].str.contains("FMR n/a").all()
