"""Config mistakes are caught when the Snakefile is parsed, each named by its key path
(issue 11 item 5, issue 16 items 7-10): unit tests of facecast.config.check on dict
configs, the clear messages at job level, and a table of mistakes run as ``snakemake -n``.
"""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, demo_test_config, tiny_demo_config
from PIL import Image
from scale_support import scale_config

from facecast.config import check as cc
from facecast.config import columns as config_columns
from facecast.config.check import ConfigError, check_config, collect
from facecast.config.schema import validate_config as validate

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")
CELEBA_40 = ("5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips "
             "Big_Nose Black_Hair Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby "
             "Double_Chin Eyeglasses Goatee Gray_Hair Heavy_Makeup High_Cheekbones Male "
             "Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face Pale_Skin "
             "Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair "
             "Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace "
             "Wearing_Necktie Young").split()


#: stages whose config.yaml settings name the demo's own columns/models (switched off for
#: configs on other data unless a test sets them; their own checks have their own tests)
DEMO_STAGES = ("covariates", "audit", "features", "describe", "quality", "demographics",
               "identification")


def demo(**sections) -> dict:
    """config.yaml with top-level ``sections`` replaced, schema-validated (defaults filled).

    When the datasets, benchmarks or embedders are replaced, the demo-only stages are off.
    """
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    cfg.update(copy.deepcopy(sections))
    if {"datasets", "benchmarks", "embed"} & set(sections):
        for stage in DEMO_STAGES:
            if stage not in sections:
                cfg[stage] = {**cfg.get(stage, {}), "enabled": False}
    validate(cfg, SCHEMA)
    return cfg


def errors_of(cfg: dict) -> list[str]:
    return collect(cfg)[0]


def one_error(cfg: dict, key: str) -> str:
    """The single error of ``cfg``; it must start with ``key``."""
    errs = errors_of(cfg)
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"{key}:"), errs[0]
    return errs[0]


def folder_dataset(tmp_path: Path) -> dict:
    root = tmp_path / "photos"
    root.mkdir(exist_ok=True)
    return {"mine": {"kind": "folder", "root": str(root)}}


def no_fairness() -> dict:
    with open(REPO / "config.yaml") as fh:
        fair = yaml.safe_load(fh)["fairness"]
    return {**fair, "enabled": False}


# ------------------------------------------------------------- valid configs stay valid


@pytest.mark.parametrize("make", [lambda: demo(), tiny_demo_config, demo_test_config,
                                  scale_config], ids=["config.yaml", "tiny_demo",
                                                      "demo_test", "scale"])
def test_shipped_and_test_configs_pass(make):
    cfg = make()
    validate(cfg, SCHEMA)
    assert collect(cfg) == ([], [])
    check_config(cfg)


def _fake(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return str(path)


def _celeba_root(tmp_path: Path) -> Path:
    root = tmp_path / "celeba"
    (root / "img_align_celeba").mkdir(parents=True)
    (root / "Anno").mkdir()
    (root / "Anno" / "list_attr_celeba.txt").write_text(
        "1\n" + " ".join(CELEBA_40) + "\n000001.jpg " + " ".join(["1"] * 40) + "\n")
    return root


def test_cast11_on_celeba_with_its_scorers_passes(tmp_path, monkeypatch):
    """config/cast11.yaml on a CelebA dataset with the scorers that write its columns."""
    home = tmp_path / "torch"
    monkeypatch.setenv("TORCH_HOME", str(home))
    _fake(home / "hub/checkpoints/res34_fair_align_multi_7_20190809.pt")
    _fake(home / "hub/pyiqa/P2P_RoIPoolModel-fit.10.bs.120-ca69882e.pth")
    _fake(home / "hub/checkpoints/resnet18-f37072fd.pth")
    with open(REPO / "config/cast11.yaml") as fh:
        cast = yaml.safe_load(fh)
    cfg = demo(datasets={"celeba": {"kind": "celeba", "root": str(_celeba_root(tmp_path))}},
               attributes={"scorers": ["native", "age_gender", "fairface", "celeba40"],
                           "pyiqa": {"metrics": ["paq2piq"]}},
               embed={"models": {"r100": {"backend": "iresnet", "arch": "r100",
                                          "weights": _fake(tmp_path / "backbone.pth")}}},
               mining={**cast["mining"], "reference_model": "r100"},
               benchmarks=cast["benchmarks"],
               evaluate={**cast["evaluate"], "models": ["r100"]},
               fairness={"protocols": ["random"],
                         "protected": {"gender": {"column": "label_Male", "values": {
                             "0": "female", "1": "male"}}},
                         "legitimate": {"glasses": {"column": "Eyeglasses", "bins": [0.5]}},
                         "soft_attributes": {"gender": {"categories": {
                             "male": "fairface_male", "female": "1-fairface_male"}}}})
    assert collect(cfg) == ([], [])


# ----------------------------------------------------------- issue 11.5: columns


def test_fairness_column_missing_on_real_data_is_named(tmp_path):
    """The demo's fairness section copied onto a folder of photos fails at parse time."""
    with open(REPO / "config.yaml") as fh:
        demo_fairness = yaml.safe_load(fh)["fairness"]
    cfg = demo(datasets=folder_dataset(tmp_path), benchmarks={}, evaluate={"benchmarks": []},
               fairness={**demo_fairness, "protocols": []})
    errs = errors_of(cfg)
    keys = {e.split(":")[0] for e in errs}
    assert {"fairness.protected.gender.column", "fairness.protected.skin.column",
            "fairness.legitimate.age.column", "fairness.legitimate.glasses.column",
            "fairness.legitimate.pose.column",
            "fairness.soft_attributes.gender.categories.male",
            "fairness.soft_attributes.gender.categories.female"} == keys
    msg = next(e for e in errs if e.startswith("fairness.protected.gender.column"))
    assert "'label_male' is not produced by any configured scorer nor a label of dataset " \
           "'mine'" in msg
    # the known columns are listed once, in a note after the errors, not in each error
    assert "bbox_height" not in msg
    notes = cc.notes()
    assert len(notes) == 1 and notes[0].startswith("known columns of dataset 'mine': ")
    assert "bbox_height" in notes[0]
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    assert str(info.value).count("known columns of dataset 'mine'") == 1
    # bbox_height comes from the native scorer: no error for legitimate.size
    assert not any(e.startswith("fairness.legitimate.size") for e in errs)


def test_fairness_off_switch(tmp_path):
    from facecast.fairness import targets

    cfg = demo(datasets=folder_dataset(tmp_path), benchmarks={}, evaluate={"benchmarks": []},
               fairness=no_fairness())
    assert errors_of(cfg) == []
    assert targets.targets(cfg, "mine", ["mine"]) == []
    on = demo()
    assert on["fairness"]["enabled"] is True  # the schema default
    assert targets.targets(on, "demo", ["demo"])


def test_benchmark_filter_and_correlation_columns(tmp_path):
    cfg = demo(benchmarks={"b": {"filters": [{"attribute": "label_blurr", "mode": "rank",
                                              "low": 0.5, "high": 1.0}]}},
               evaluate={"benchmarks": ["b"]}, fairness={"protocols": ["b"]},
               correlations={"columns": ["sharpness_laplacian", "sharpnes"]})
    errs = errors_of(cfg)
    assert len(errs) == 2, errs
    assert errs[0].startswith("benchmarks.b.filters[0].attribute: 'label_blurr'")
    assert errs[1].startswith("correlations.columns[1]: 'sharpnes'")


def test_scorer_columns_follow_the_configured_scorers():
    base = demo()
    cols = config_columns.known_columns(base)["demo"]
    assert {"age_gender_age", "embed_norm_lbp", "embed_norm_dlib", "yaw", "label_male"} <= cols
    assert not any(c.startswith("fairface_") for c in cols)
    cfg = demo(attributes={"scorers": ["native"], "embed_norms": False,
                           "pyiqa": {"metrics": ["piqe", "nima-koniq"]}})
    cols = config_columns.known_columns(cfg)["demo"]
    assert {"iqa_piqe", "iqa_nima_koniq"} <= cols
    assert "age_gender_age" not in cols and "embed_norm_lbp" not in cols
    # a celeba40 head trained here on two labels writes those two columns
    cfg = demo(attributes={"scorers": ["native", "celeba40"],
                           "trainer": {"labels": ["glasses", "label_hat"]}})
    assert {"glasses", "hat"} <= config_columns.known_columns(cfg)["demo"]


def test_table_manifest_header_gives_its_labels(tmp_path):
    csv = tmp_path / "faces.csv"
    csv.write_text("\ufeffpath,identity,split,gender,label_age\na.jpg,p1,test,f,30\n")
    ds = {"t": {"kind": "table", "root": str(tmp_path), "manifest": str(csv)}}
    cfg = demo(datasets=ds, benchmarks={"old": {"filters": [
        {"attribute": "label_age", "mode": "rank", "low": 0.8, "high": 1.0}]}},
        evaluate={"benchmarks": []},
        fairness={"protocols": [], "protected": {"g": {"column": "label_gender",
                                                       "values": {"f": "F", "m": "M"}}},
                  "legitimate": {}, "soft_attributes": {}})
    assert errors_of(cfg) == []
    cfg["fairness"]["protected"]["g"]["column"] = "label_sex"
    one_error(cfg, "fairness.protected.g.column")
    (known,) = cc.notes()
    assert "label_gender" in known and "label_split" not in known
    # a Parquet manifest: the schema is read, not the rows
    pq_path = tmp_path / "faces.parquet"
    pd.DataFrame({"path": ["a.jpg"], "identity": ["p"], "sex": ["f"],
                  "label_age": [30.0]}).to_parquet(pq_path)
    cfg["datasets"]["t"]["manifest"] = str(pq_path)
    assert errors_of(cfg) == []


def test_unreadable_table_header_is_skipped_with_a_warning(tmp_path):
    bad = tmp_path / "faces.csv"
    bad.write_bytes(b"\xff\xfe\x00garbage\x00\xff\n")
    cfg = demo(datasets={"t": {"kind": "table", "root": str(tmp_path), "manifest": str(bad)}},
               benchmarks={}, evaluate={"benchmarks": []}, fairness={"protocols": []})
    errs, warns = collect(cfg)
    assert errs == []
    assert len(warns) == 1 and warns[0].startswith("datasets.t.manifest: cannot read")


def test_celeba_labels_from_its_annotation_header(tmp_path):
    root = _celeba_root(tmp_path)
    cfg = demo(datasets={"c": {"kind": "celeba", "root": str(root)}},
               benchmarks={"glasses": {"filters": [{"attribute": "label_Eyeglasses",
                                                    "mode": "class", "value": 1}]}},
               evaluate={"benchmarks": []}, fairness=no_fairness())
    assert errors_of(cfg) == []
    (root / "Anno" / "list_attr_celeba.txt").unlink()
    assert one_error(cfg, "datasets.c.root").count("list_attr_celeba.txt") == 1


def test_trainer_labels_must_be_dataset_labels(tmp_path):
    cfg = demo(attributes={"scorers": ["native"],
                           "trainer": {"enabled": True, "labels": ["glases"]}})
    assert "'glases' is not a label of dataset 'demo'" in one_error(
        cfg, "attributes.trainer.labels[0]")
    cfg = demo(datasets=folder_dataset(tmp_path), benchmarks={}, evaluate={"benchmarks": []},
               fairness=no_fairness(), attributes={"scorers": ["native", "celeba40"]})
    assert "no label columns" in one_error(cfg, "attributes.trainer")


# ------------------------------------------------------------- issue 16.8: names


@pytest.mark.parametrize(("section", "value", "key", "unknown", "known"), [
    ("evaluate", {"benchmarks": ["blurry", "blury"]}, "evaluate.benchmarks[1]", "'blury'",
     "blurry, old, glasses, low_contrast, random, fair_pool"),
    ("evaluate", {"benchmarks": ["lfw"]}, "evaluate.benchmarks[0]", "'lfw'", "blurry"),
    ("evaluate", {"models": ["lbp", "arcface"]}, "evaluate.models[1]", "'arcface'",
     "lbp, dlib"),
    ("fairness", {"models": ["dlibb"]}, "fairness.models[0]", "'dlibb'", "lbp, dlib"),
    ("fairness", {"protocols": ["fairpool"]}, "fairness.protocols[0]", "'fairpool'",
     "fair_pool"),
    ("fairness", {"datasets": ["dmeo"]}, "fairness.datasets[0]", "'dmeo'", "demo"),
    ("fairness", {"thresholds": {"from_protocol": "dev"}}, "fairness.thresholds.from_protocol",
     "'dev'", "fair_pool"),
    ("mining", {"reference_model": "arcface"}, "mining.reference_model", "'arcface'",
     "lbp, dlib"),
])
def test_unknown_names_are_named_with_the_known_ones(section, value, key, unknown, known):
    with open(REPO / "config.yaml") as fh:
        base = yaml.safe_load(fh)[section]
    err = one_error(demo(**{section: {**base, **value}}), key)
    assert unknown in err and known in err


def test_lfw_and_imports_are_known_protocols(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("1 1\n")
    lists = tmp_path / "c11"
    lists.mkdir()
    ds = {"demo": {"kind": "synthetic"},
          "lfw": {"kind": "lfw", "root": str(tmp_path), "pairs": str(pairs)}}
    cfg = demo(datasets=ds, benchmarks={}, evaluate={"benchmarks": ["lfw", "c11"], "imports": {
        "c11": {"path": str(lists), "datasets": ["lfw", "lwf"]}}},
        fairness={**no_fairness()})
    errs = errors_of(cfg)
    assert errs == ["evaluate.imports.c11.datasets[1]: unknown dataset 'lwf'; known: demo, lfw"]


# ------------------------------------------------------- issue 16.7: files and weights


def test_dataset_files_must_exist(tmp_path):
    ds = {"f": {"kind": "folder", "root": str(tmp_path / "nope"),
                "exclude": str(tmp_path / "mask.txt")},
          "t": {"kind": "table", "root": str(tmp_path), "manifest": str(tmp_path / "m.csv")},
          "l": {"kind": "lfw", "root": str(tmp_path), "pairs": str(tmp_path / "pairs.txt")}}
    cfg = demo(datasets=ds, benchmarks={}, evaluate={"benchmarks": []}, fairness=no_fairness())
    keys = [e.split(":")[0] for e in errors_of(cfg)]
    assert keys == ["datasets.f.root", "datasets.f.exclude", "datasets.t.manifest",
                    "datasets.l.pairs"]


@pytest.mark.parametrize(("model", "key", "text"), [
    ({"backend": "iresnet", "arch": "r50"}, "embed.models.m.weights",
     "backend iresnet needs a weight file"),
    ({"backend": "iresnet", "weights": "nowhere/backbone.pth"}, "embed.models.m.weights",
     "'nowhere/backbone.pth' does not exist"),
    ({"backend": "onnx", "weights": "nowhere/model.onnx"}, "embed.models.m.weights",
     "does not exist"),
    ({"backend": "facenet"}, "embed.models.m.weights", "20180402-114759-vggface2.pt"),
    ({"backend": "dlib_resnet", "weights": "nowhere/dlib.dat"}, "embed.models.m.weights",
     "does not exist"),
])
def test_embed_weights_checked_at_parse_time(tmp_path, monkeypatch, model, key, text):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.chdir(tmp_path)
    cfg = demo(embed={"models": {"lbp": {"backend": "lbp"}, "dlib": {"backend": "dlib_resnet"},
                                 "m": model}})
    assert text in one_error(cfg, key)


def test_scorer_and_detector_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    cfg = demo(attributes={"scorers": ["native", "fairface", "celeba40"],
                           "celeba40": {"weights": str(tmp_path / "head.pt")},
                           "pyiqa": {"metrics": ["piqe", "paq2piq"]}},
               faces={"weights_dir": str(tmp_path)})
    keys = [e.split(":")[0] for e in errors_of(cfg)]
    assert keys == ["faces.weights_dir", "attributes.fairface.weights",
                    "attributes.celeba40.weights", "attributes.pyiqa.metrics[1]",
                    "attributes.pyiqa.metrics[1]"]  # stage order: faces, then attributes
    # celeba40 trained in this run (default path) needs no file
    cfg = demo(attributes={"scorers": ["native", "celeba40"]})
    assert errors_of(cfg) == []


def test_celeba40_checkpoint_labels_name_its_columns(tmp_path):
    import torch

    from facecast.attributes.heads import resnet18_head, save_head_checkpoint

    ckpt = save_head_checkpoint(resnet18_head(2), ["Smiling", "Bangs"], tmp_path / "h.pt",
                                input_size=32)
    cfg = demo(attributes={"scorers": ["native", "celeba40"],
                           "celeba40": {"weights": str(ckpt)}},
               correlations={"columns": ["Smiling", "Mustache"]})
    assert "'Mustache'" in one_error(cfg, "correlations.columns[1]")
    del torch


# --------------------------------------------------------- issue 16.7: ranges, options


def test_bands_filters_and_bins():
    with open(REPO / "config.yaml") as fh:
        base = yaml.safe_load(fh)
    benches = {**base["benchmarks"],
               "fair_pool": {"filters": [], "mining": {"band_mode": "absolute",
                                                      "band": [0.9, 0.1]}},
               "bad": {"filters": [{"attribute": "label_age", "mode": "value", "low": 60,
                                    "high": 20},
                                   {"attribute": "label_glasses", "mode": "class"},
                                   {"attribute": "label_blur", "mode": "rank", "low": 10,
                                    "high": 90}]}}
    cfg = demo(mining={**base["mining"], "band": [0.5, 1.5]}, benchmarks=benches,
               fairness={**base["fairness"], "legitimate": {
                   "age": {"column": "label_age", "bins": [65, 35], "labels": ["a", "b"]}}})
    keys = [e.split(":")[0] for e in errors_of(cfg)]
    assert keys == ["mining.band", "benchmarks.fair_pool.mining.band",
                    "benchmarks.bad.filters[0]", "benchmarks.bad.filters[1]",
                    "benchmarks.bad.filters[2]", "fairness.legitimate.age.bins",
                    "fairness.legitimate.age.labels"]


def test_backend_options_belong_to_their_backend():
    cfg = demo(embed={"models": {"lbp": {"backend": "lbp", "arch": "r50"},
                                 "dlib": {"backend": "dlib_resnet", "pca_dim": 64}}})
    errs = errors_of(cfg)
    assert errs[0].startswith("embed.models.lbp.arch: is an option of backend arcface_torch, "
                              "not of lbp")
    assert errs[1].startswith("embed.models.dlib.pca_dim: is an option of backend lbp, not "
                              "of dlib_resnet (dlib_resnet options: engine, num_jitters, weights)")
    assert len(errs) == 2


def test_crops_a_stage_reads_must_be_stored():
    """faces.crops: [arcface] (the fast choice for pre-aligned input) is refused at parse
    time when a configured stage reads the facenet crop, naming that key."""
    from facecast.embed.registry import BACKENDS
    from facecast.faces.checks import BACKEND_CROPS

    # every backend says its crop (onnx and torchscript: their crop option)
    assert set(BACKEND_CROPS) | {"onnx", "torchscript"} == set(BACKENDS)
    faces = {"detector": "none", "crops": ["arcface"]}
    ok = demo(faces=faces, embed={"models": {"dlib": {"backend": "dlib_resnet"}}},
              features={"enabled": False})
    assert not [e for e in errors_of(ok) if e.startswith("faces.crops")]
    bad = demo(faces=faces, embed={"models": {"fn": {"backend": "facenet"},
                                              "dlib": {"backend": "dlib_resnet"}}},
               attributes={"crop": "facenet"}, features={"enabled": True})
    errs = [e for e in errors_of(bad) if e.startswith("faces.crops")]
    assert len(errs) == 3, errs
    assert "embed.models.fn (backend facenet) reads" in errs[0]
    assert "attributes.crop reads" in errs[1]
    assert "features.enabled" in errs[2]
    no_arc = demo(faces={"crops": ["facenet"]},
                  embed={"models": {"o": {"backend": "onnx", "weights": "m.onnx",
                                          "crop": "arcface"}}})
    assert any("embed.models.o (backend onnx) reads" in e for e in errors_of(no_arc))
    no_fn = demo(faces={"crops": ["arcface"]}, features={"enabled": False},
                 embed={"models": {"t": {"backend": "torchscript", "weights": "m.pt",
                                         "crop": "facenet"}}})
    assert any("embed.models.t (backend torchscript) reads" in e for e in errors_of(no_fn))


def test_backend_option_sets_match_the_backend_classes():
    import inspect

    from facecast.embed.checks import backend_options
    from facecast.embed.registry import BACKENDS, backend_class

    for backend in BACKENDS:
        allowed, required = backend_options(backend)
        params = inspect.signature(backend_class(backend).__init__).parameters
        real = {k for k, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                } - {"self", "name", "device", "amp", "threads"}
        assert real <= allowed, backend
        assert {k for k in real if params[k].default is params[k].empty} - {"weights"} \
            <= required | {"weights"}


def test_mining_device_gpu_says_use_cuda():
    with open(REPO / "config.yaml") as fh:
        base = yaml.safe_load(fh)["mining"]
    err = one_error(demo(mining={**base, "device": "gpu"}), "mining.device")
    assert "use auto, cpu, cuda or cuda:N" in err


def test_cuda_without_gpu_warns_at_parse_time(monkeypatch):
    monkeypatch.setattr(cc, "_cuda_available", lambda: False)
    with open(REPO / "config.yaml") as fh:
        base = yaml.safe_load(fh)
    cfg = demo(embed={**base["embed"], "device": "cuda"},
               faces={**base["faces"], "device": "cuda:1"})
    errs, warns = collect(cfg)
    assert errs == []
    assert len(warns) == 1 and warns[0].startswith("faces.device, embed.device: cuda is set")


def test_every_mistake_in_one_error_and_registered_checkers():
    with open(REPO / "config.yaml") as fh:
        base = yaml.safe_load(fh)
    cfg = demo(evaluate={**base["evaluate"], "models": ["nope"]},
               mining={**base["mining"], "band": [0.9, 0.1]})

    def extra(config):
        return ["covariates.models[0]: unknown model 'x'"]

    cc.register(extra)
    try:
        with pytest.raises(ConfigError) as info:
            check_config(cfg)
    finally:
        cc.CHECKERS.remove(extra)
    # stage order: analysis (mining) before evaluate; registered checkers last
    assert [e.split(":")[0] for e in info.value.errors] == [
        "mining.band", "evaluate.models[0]", "covariates.models[0]"]
    assert str(info.value).startswith("3 config mistakes (nothing was run):")


def test_static_column_lists_match_the_scorers(tmp_path):
    from facecast.attributes.age_gender import AGE_COLUMNS
    from facecast.attributes.heads import FAIRFACE_COLUMNS
    from facecast.attributes.native import NATIVE_COLUMNS
    from facecast.datasets.checks import synthetic_labels
    from facecast.datasets.synthetic.generate import generate_dataset

    cfg = demo(attributes={"scorers": ["native", "age_gender", "fairface"],
                           "embed_norms": False})
    cols = config_columns.scorer_columns(cfg, set())
    assert cols == set(NATIVE_COLUMNS) | set(AGE_COLUMNS) | set(FAIRFACE_COLUMNS)
    table = generate_dataset(tmp_path / "syn", seed=1, n_identities=2, images_per_identity=1,
                             image_size=64)
    made = {c for c in table.columns if c.startswith("label_")}
    assert made <= synthetic_labels()
    assert {c for c in made if not c.startswith("label_noisy_")} == {
        c for c in synthetic_labels() if not c.startswith("label_noisy_")}


# ------------------------------------------- issue 16.9: clear messages inside the jobs


def test_iresnet_without_weights_is_one_sentence():
    from facecast.embed.registry import build_embedder

    with pytest.raises(ValueError, match=r"^embed\.models\.arc\.weights: backend iresnet "
                                         r"needs 'weights'"):
        build_embedder("arc", {"backend": "iresnet", "arch": "r18"}, device="cpu")


def test_lbp_option_error_names_no_internal_parameter():
    from facecast.embed.registry import build_embedder

    with pytest.raises(ValueError) as info:
        build_embedder("l", {"backend": "lbp", "flip": True}, device="cpu")
    msg = str(info.value)
    assert msg.startswith("embed.models.l: unknown option(s) ['flip']")
    assert "_fit_options" not in msg and "pca_dim" in msg


def test_fairness_values_matching_nothing_names_the_key():
    from facecast.fairness.groups import image_labels, parse_specs

    attrs = pd.DataFrame({"image_id": ["a", "b"], "identity": ["p", "q"],
                          "race": ["Black", "White"]})
    spec = parse_specs({"race": {"column": "race", "values": {"black": "B", "white": "W"}}})
    with pytest.raises(ValueError, match=r"^fairness\.protected\.race\.values: no value of "
                                         r"column 'race' matches"):
        image_labels(attrs, spec, [])
    ok = parse_specs({"race": {"column": "race", "values": {"Black": "B", "White": "W"}}})
    assert list(image_labels(attrs, ok, [])["race"]) == ["B", "W"]


def test_mining_device_message_at_job_level():
    from facecast.analysis.mining_config import resolve_device

    with pytest.raises(ValueError, match="mining.device: 'gpu' is not a device; use auto"):
        resolve_device("gpu")


# -------------------------------------------------- issue 16.10: faces.max_pixels honoured


def test_max_pixels_above_pillows_limit_is_honoured(monkeypatch):
    from facecast.faces.decode import read_image

    buf = io.BytesIO()
    Image.fromarray(np.zeros((100, 100, 3), np.uint8)).save(buf, format="PNG")
    # Pillow refuses more than twice MAX_IMAGE_PIXELS on its own (179 MP by default);
    # shrink its limit so a small image stands for a 200 MP photo
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    res = read_image(buf.getvalue(), max_pixels=1_000_000)
    assert res.status == "ok", res.message
    small = read_image(buf.getvalue(), max_pixels=5000)
    assert small.status == "decode_error" and "max_pixels 5000" in small.message


# ------------------------------------------- the "Done when" table, as snakemake -n


def _mistake(tmp_path: Path, edit) -> dict:
    cfg = tiny_demo_config()
    edit(cfg, tmp_path)
    return cfg


def _typo_benchmark(cfg, _):
    cfg["evaluate"]["benchmarks"] = ["blurry", "blury"]


def _folder_with_demo_fairness(cfg, tmp):
    (tmp / "photos").mkdir()
    cfg["datasets"] = {"mine": {"kind": "folder", "root": str(tmp / "photos")}}
    cfg["benchmarks"] = {"random": {"filters": []}}
    cfg["evaluate"]["benchmarks"] = ["random"]
    cfg["fairness"]["protocols"] = ["random"]


def _iresnet_without_weights(cfg, _):
    cfg["embed"]["models"]["arc"] = {"backend": "iresnet", "arch": "r50"}


def _gpu_device(cfg, _):
    cfg["mining"]["device"] = "gpu"


def _reversed_band_and_root(cfg, tmp):
    cfg["mining"]["band"] = [1.0, 0.5]
    cfg["datasets"]["lfw"] = {"kind": "lfw", "root": str(tmp / "lfw"),
                              "pairs": str(tmp / "pairs.txt")}


@pytest.mark.parametrize(("edit", "expected"), [
    (_typo_benchmark, ["evaluate.benchmarks[1]: unknown protocol 'blury'; known: blurry"]),
    (_folder_with_demo_fairness, [
        "fairness.protected.gender.column: 'label_male' is not produced by any configured "
        "scorer nor a label of dataset 'mine'"]),
    (_iresnet_without_weights, ["embed.models.arc.weights: backend iresnet needs a weight "
                                "file"]),
    (_gpu_device, ["mining.device: 'gpu' is not a device; use auto, cpu, cuda or cuda:N"]),
    (_reversed_band_and_root, ["mining.band: band [1.0, 0.5] has low > high",
                               "datasets.lfw.root: directory", "datasets.lfw.pairs: file"]),
], ids=["unknown-benchmark", "missing-column", "iresnet-weights", "gpu", "band+root"])
def test_config_mistakes_fail_a_dry_run_before_any_job(tmp_path, edit, expected):
    work = tmp_path / "work"
    work.mkdir()
    cfg_path = tmp_path / "mistake.yaml"
    cfg_path.write_text(yaml.safe_dump(_mistake(tmp_path, edit), sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "--directory", str(work), "--configfile", str(cfg_path), "-n"],
                          capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "config mistake" in out and "nothing was run" in out, out
    for text in expected:
        assert text in out, out
    assert "Job stats" not in out  # no job was even planned
    assert not (work / "results").exists()


def test_per_benchmark_mining_typo_is_a_schema_error_naming_the_key():
    """Issue 11.6 (the schema's part): a typo in a benchmark's mining overrides."""
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    cfg["benchmarks"]["fair_pool"]["mining"]["n_genuin"] = 5
    with pytest.raises(Exception, match="n_genuin"):
        validate(cfg, SCHEMA)
