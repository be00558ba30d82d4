"""Analysis keys are checked at parse time by the config schema (before any job runs)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from facecast.analysis.stage import PER_BENCHMARK_MINING_KEYS, benchmark_mining_config
from facecast.config.check import ConfigError
from facecast.config.schema import validate_config as validate

ROOT = Path(__file__).parents[1]
SCHEMA = str(ROOT / "workflow/schemas/config.schema.yaml")


@pytest.fixture(scope="module")
def demo() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.mark.parametrize("over, needle", [
    ({"n_genuin": 5}, "n_genuin"),                       # a typo
    ({"n_folds": 3}, "n_folds"),                         # global only: names rule outputs
    ({"mode": "every"}, "every"),
    ({"band": [0.1]}, "band"),
    ({"n_impostor": -1}, "n_impostor"),
])
def test_bad_per_benchmark_mining_overrides_fail_validation(demo, over, needle):
    cfg = copy.deepcopy(demo)
    cfg["benchmarks"]["blurry"]["mining"] = over
    with pytest.raises(ConfigError, match=needle):
        validate(cfg, SCHEMA)


def test_good_overrides_pass_and_get_no_defaults_that_would_hide_the_global_ones(demo):
    cfg = copy.deepcopy(demo)
    cfg["benchmarks"]["blurry"]["mining"] = {"n_genuine": 5}
    validate(cfg, SCHEMA)
    assert cfg["benchmarks"]["blurry"]["mining"] == {"n_genuine": 5}
    assert cfg["benchmarks"]["fair_pool"]["mining"] == {"mode": "all", "n_impostor": 20000}
    assert cfg["benchmarks"]["blurry"]["rank_method"] == "facecast"
    assert "rank_method" not in cfg["benchmarks"]["blurry"]["filters"][0]
    assert cfg["mining"]["statuses"] == ["ok"]
    # every key the schema allows per benchmark is one the stage accepts, and vice versa
    schema = yaml.safe_load(Path(SCHEMA).read_text())
    per = schema["properties"]["benchmarks"]["additionalProperties"]["properties"]["mining"]
    assert set(per["properties"]) == set(PER_BENCHMARK_MINING_KEYS)
    top = schema["properties"]["mining"]["properties"]
    for key, spec in per["properties"].items():
        assert "default" not in spec
        assert spec.get("type", spec.get("enum")) == top[key].get("type", top[key].get("enum"))
    m = benchmark_mining_config(cfg["mining"], cfg["benchmarks"]["fair_pool"])
    assert m.mode == "all" and m.n_impostor == 20000


def test_statuses_and_rank_method_values_are_checked(demo):
    cfg = copy.deepcopy(demo)
    cfg["mining"]["statuses"] = ["ok", "no_face"]
    with pytest.raises(ConfigError, match="no_face"):
        validate(cfg, SCHEMA)
    cfg = copy.deepcopy(demo)
    cfg["benchmarks"]["old"]["filters"][0]["rank_method"] = "dense"
    with pytest.raises(ConfigError, match="dense"):
        validate(cfg, SCHEMA)
