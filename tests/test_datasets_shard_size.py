"""``shard_size: auto`` (issue 49): 10,000 images per shard up to 10M images, then at most
1,000 shards, so a 42M-image DAG has 1,000 shards per per-shard rule instead of 4,200."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from facecast.config.schema import validate_config
from facecast.datasets.manifest import DatasetError, resolve_shard_size
from facecast.datasets.stage import build_manifest
from facecast.datasets.targets import shard_ids
from facecast.io.parquet_io import read_metadata

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


@pytest.mark.parametrize(("n_images", "size", "shards"), [
    (0, 10_000, 0),
    (1, 10_000, 1),
    (10_000, 10_000, 1),
    (10_001, 10_000, 2),
    (10_000_000, 10_000, 1_000),        # the last size at 10,000 per shard
    (10_000_001, 11_000, 910),          # one image more: the next step of 1,000
    (42_000_000, 42_000, 1_000),        # WebFace42M
    (42_000_001, 43_000, 977),
    (420_000_000, 420_000, 1_000),
])
def test_auto_keeps_ten_thousand_then_at_most_a_thousand_shards(n_images, size, shards):
    assert resolve_shard_size("auto", n_images) == size
    assert resolve_shard_size(None, n_images) == size  # unset = the default, auto
    assert -(-n_images // size) == shards


def test_a_number_is_used_as_given_and_a_bad_one_refused():
    assert resolve_shard_size(400, 42_000_000) == 400
    assert resolve_shard_size("37", 5) == 37
    with pytest.raises(DatasetError, match="shard_size must be at least 1 or auto"):
        resolve_shard_size(0, 10)


def test_schema_default_is_auto_and_a_word_other_than_auto_fails_naming_the_key():
    cfg = {"datasets": {"x": {"kind": "folder", "root": "/data"}}}
    validate_config(cfg, SCHEMA)
    assert cfg["datasets"]["x"]["shard_size"] == "auto"
    bad = {"datasets": {"x": {"kind": "folder", "root": "/data", "shard_size": "big"}}}
    with pytest.raises(Exception, match="shard_size"):
        validate_config(bad, SCHEMA)


def _folder(root: Path, n: int) -> Path:
    from PIL import Image

    for k in range(n):
        person = root / f"p{k % 3}"
        person.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (k, k, k)).save(person / f"{k}.png")
    return root


def test_the_manifest_records_the_resolved_size(tmp_path: Path):
    root = _folder(tmp_path / "data", 7)
    for setting, want, n_shards in (("auto", 10_000, 1), (3, 3, 3)):
        out = tmp_path / f"manifest_{setting}.parquet"
        spec = {"kind": "folder", "root": str(root), "shard_size": setting}
        df = build_manifest(spec, tmp_path, out)
        assert len(df) == 7
        meta = read_metadata(out)
        assert meta["facecast.shard_size"] == str(want)
        assert shard_ids(out) == [f"{s:05d}" for s in range(n_shards)]
