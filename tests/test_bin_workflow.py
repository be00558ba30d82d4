"""Verification .bin sets through Snakemake (issue 21.3): a .bin dataset implies its
protocol, CC11 in one dataset, every .bin set in one table.

Two small runs: a RecordIO training set with lfw.bin and a CC11 .bin, every stage on (the
config that used to crash in import_protocol: "no pair resolves" for the RecordIO
dataset), planned and taken as far as the protocols; then lfw.bin (one empty and one
undecodable image) and a CC11 .bin evaluated end to end with lbp embeddings.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import yaml
from conftest import REPO, run_snakemake
from PIL import Image

from facecast.config.bin_sets import CC11_LABELS, CC11_NAMES
from facecast.datasets.insightface_bin import write_bin
from facecast.datasets.recordio import pack, write_recordio
from facecast.io.parquet_io import read_parquet, read_provenance

pytestmark = pytest.mark.slow


def _jpeg(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _pairs(rng: np.random.Generator, n_pairs: int) -> tuple[list[bytes], list[bool]]:
    """Pairs of 112 px images: a genuine pair is one smooth random pattern and a noisy copy,
    an impostor pair two patterns (the lbp baseline separates them, not perfectly)."""
    def pattern() -> np.ndarray:
        small = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
        return np.asarray(Image.fromarray(small).resize((112, 112), Image.Resampling.BICUBIC))

    images, issame = [], []
    for k in range(n_pairs):
        a = pattern()
        same = k % 2 == 0
        b = a if same else pattern()
        b = np.clip(b + rng.normal(0, 40, b.shape), 0, 255).astype(np.uint8)
        images += [_jpeg(a), _jpeg(b)]
        issame.append(same)
    return images, issame


def _recordio(folder) -> None:
    rng = np.random.default_rng(5)
    imgs = [(i, _jpeg(rng.integers(0, 255, (112, 112, 3), dtype=np.uint8)))
            for i in range(4) for _ in range(3)]
    n = len(imgs)
    records = [(0, pack([n + 1, n + 1 + 4], b""))]
    records += [(k + 1, pack(float(lab), jpg, id=k + 1)) for k, (lab, jpg) in enumerate(imgs)]
    records += [(n + 1 + i, pack([1 + 3 * i, 1 + 3 * (i + 1)], b"")) for i in range(4)]
    write_recordio(folder / "train.rec", folder / "train.idx", records)


@pytest.fixture(scope="module")
def bin_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("bin_data")
    rng = np.random.default_rng(0)
    images, issame = _pairs(rng, 40)
    images[3] = b""                                # an empty entry: manifest decode_error
    images[6] = b"this is not an image at all"     # undecodable bytes: faces decode_error
    write_bin(d / "lfw.bin", images, issame, protocol=2)
    images, issame = _pairs(rng, 11 * 10)          # CC11 layout: 11 blocks of 10 pairs
    write_bin(d / "cc11_val.bin", images, issame, protocol=4)
    _recordio(d)
    return d


def _base(d) -> dict:
    cfg = yaml.safe_load((REPO / "config/cc11.yaml").read_text())
    cfg["datasets"] = {
        "lfw": {"kind": "insightface_bin", "path": str(d / "lfw.bin"), "shard_size": 100},
        "cc11": {"kind": "insightface_bin", "path": str(d / "cc11_val.bin"),
                 "layout": "cc11", "shard_size": 400}}
    cfg["embed"]["models"] = {"lbp": {"backend": "lbp", "pca_dim": 16}}
    cfg["evaluate"]["models"] = ["lbp"]
    return cfg


def _jobs(dry_run: str) -> set[tuple[str, str]]:
    """``(rule, wildcards)`` of every job a dry run plans."""
    out, rule = set(), None
    for line in dry_run.splitlines():
        m = re.match(r"^(?:localrule|rule) (\w+):", line)
        if m:
            rule = m.group(1)
        m = re.match(r"^\s+wildcards: (.*)$", line)
        if m and rule:
            out.add((rule, m.group(1)))
    return out


def test_recordio_and_bin_sets_in_one_run(bin_data, tmp_path):
    """Every stage on: the .bin protocols are imported for their own datasets only."""
    cfg = yaml.safe_load((REPO / "config/own_photos.yaml").read_text())
    cfg["datasets"] = {"web": {"kind": "recordio", "rec": str(bin_data / "train.rec")},
                       **_base(bin_data)["datasets"]}
    cfg["faces"] = {"detector": "none"}
    cfg["embed"] = {"models": {"lbp": {"backend": "lbp", "pca_dim": 8}}}
    cfg["benchmarks"] = {"random": {"filters": []}}
    cfg["mining"].update({"reference_model": "lbp", "statuses": ["ok", "aligned_input"]})
    cfg["evaluate"] = {"models": ["lbp"]}
    cfg["fairness"].pop("protocols")
    dry = run_snakemake(tmp_path, cfg, extra=["-n"]).stdout
    jobs = _jobs(dry)
    imports = {w for r, w in jobs if r in ("import_protocol", "cc11_protocols")}
    assert imports == {"ds=lfw, proto=lfw", "ds=cc11"}  # CC11: eleven blocks in one job
    for rule in ("quality_edc", "demographics", "evaluate_benchmark"):
        planned = {w for r, w in jobs if r == rule}
        assert planned and not any("ds=web" in w and ("lfw" in w or "proto" in w)
                                   for w in planned if "random" not in w), rule
        assert not any(w.startswith("ds=lfw,") and "random" in w for w in planned), rule
    assert ("bin_suite", "") not in jobs  # no wildcards: listed without a wildcards line
    assert "bin_suite" in dry and "cc11_table" in dry
    # the protocol step (it crashed for the RecordIO dataset): lfw's, and one CC11 block
    run_snakemake(tmp_path, cfg, ["results/lfw/protocols/lfw.parquet",
                                  "results/cc11/protocols/glasses_facial_hair.parquet"])
    r = tmp_path / "results"
    assert read_parquet(r / "lfw/protocols/lfw.parquet")["fold"].nunique() == 10
    assert len(read_parquet(r / "cc11/protocols/glasses_facial_hair.parquet")) == 10
    assert not (r / "web/protocols").exists()


@pytest.fixture(scope="module")
def bin_run(bin_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("bin_run")
    # the two tables pull in everything they need (the default run adds correlations,
    # attributes and summaries, tested elsewhere)
    run_snakemake(work, _base(bin_data), ["results/bin_suite.md", "results/cc11/eval/cc11.md"])
    return work / "results"


def test_every_bin_set_in_one_table(bin_run):
    md = (bin_run / "bin_suite.md").read_text()
    assert "| model | lfw | cc11_val |" in md
    suite = read_parquet(bin_run / "bin_suite.parquet")
    assert suite["set"].tolist() == ["lfw", "cc11_val"]
    assert (suite["status"] == "ok").all()
    lfw = read_parquet(bin_run / "lfw/eval/lbp/lfw/metrics.parquet").iloc[0]
    assert 0.6 < lfw["accuracy"] <= 1.0
    assert f"[lfw]Accuracy: {lfw['accuracy']:1.5f}+-{lfw['accuracy_std']:1.5f}" in md
    assert (bin_run / "bin_suite.html").read_text().count("<table>") == 2


def test_undecodable_images_are_counted_not_fatal(bin_run):
    scores = read_parquet(bin_run / "lfw/eval/lbp/lfw.parquet")
    assert len(scores) == 40
    bad = scores.set_index(scores.index)[scores["status"] != "ok"]
    assert bad.index.tolist() == [1, 3]  # images 3 (empty) and 6 (undecodable)
    assert "decode_error" in bad.loc[1, "message"]
    assert bad.loc[3, "status"] == "no_embedding"
    metrics = read_parquet(bin_run / "lfw/eval/lbp/lfw/metrics.parquet").iloc[0]
    # evaluate.failed: nonmatch (the default): both pairs count, as non-matches
    assert metrics["n_pairs"] == 40 and metrics["n_skipped"] == 0
    assert metrics["n_failed"] == 2 and metrics["failed"] == "nonmatch"
    assert "decode_error: 1" in metrics["failed_statuses"]
    faces = read_parquet(next((bin_run / "lfw/faces").glob("*.parquet")))
    assert faces["status"].value_counts()["decode_error"] == 2


def test_cc11_blocks_and_table(bin_run):
    for b, name in enumerate(CC11_NAMES):
        proto = bin_run / f"cc11/protocols/{name}.parquet"
        pairs = read_parquet(proto)
        assert pairs["pair_index"].tolist() == list(range(10 * b, 10 * b + 10))
        assert pairs["fold"].tolist() == [str(k) for k in range(10)]
        assert read_provenance(proto)["block"] == name
    md = (bin_run / "cc11/eval/cc11.md").read_text()
    assert "| model | " + " | ".join(CC11_LABELS) + " | Avg |" in md
    table = read_parquet(bin_run / "cc11/eval/cc11.parquet")
    blocks = table[table["block"].isin(CC11_NAMES)]
    avg = table[table["block"] == "average"].iloc[0]
    assert len(blocks) == 11 and avg["accuracy"] == pytest.approx(blocks["accuracy"].mean())
    assert avg["accuracy_std"] == pytest.approx(blocks["accuracy_std"].mean())
    row = next(line for line in md.splitlines() if line.startswith("| lbp |"))
    assert row.endswith(f"| {100 * avg['accuracy']:.2f}+-{100 * avg['accuracy_std']:.2f} |")
    suite = read_parquet(bin_run / "bin_suite.parquet").set_index("set")
    assert suite.loc["cc11_val", "accuracy"] == pytest.approx(avg["accuracy"])
