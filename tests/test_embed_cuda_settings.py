"""The CUDA settings of the embed stage, tested on the CPU (issue 40 items 2 and 3).

What a CPU can run is run: the TF32 switches (set and restored; a ``cuda`` device object
needs no GPU), the compile-cache folder and environment, the batch-invariance rule of the
provenance, the half-weights model (built on CPU and compared with the eager model under
CPU bf16 autocast), ``torch.compile`` wrapping with its build-time check (the ``eager``
dynamo backend: inductor's code generation is the GPU check's business), the config
checks, and that the CPU path of arcface_torch is the one it was (TorchScript-frozen,
float32, no compile keys).
"""

from __future__ import annotations

import copy
import logging
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from conftest import REPO

from facecast.config.check import ConfigError
from facecast.config.schema import validate_config
from facecast.embed import cuda_numerics as cn
from facecast.embed.arcface import embedder as arcface_embedder
from facecast.embed.arcface import inference as inf
from facecast.embed.arcface.weights import build_backbone
from facecast.embed.base import Embedder
from facecast.embed.checks import config_errors, half_errors
from facecast.embed.registry import build_embedder
from facecast.embed.stage import batch_invariance, embed_shard
from facecast.faces.crops import encode_png
from facecast.io.parquet_io import read_provenance

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
CUDA = torch.device("cuda")  # a device object: no GPU needed to build it
CPU = torch.device("cpu")


def test_tf32_off_for_the_job_and_restored():
    mm, dnn = torch.backends.cuda.matmul, torch.backends.cudnn
    old = (mm.allow_tf32, dnn.allow_tf32)
    try:
        mm.allow_tf32, dnn.allow_tf32 = True, True
        with cn.tf32_mode(CUDA, allow=False):
            assert (mm.allow_tf32, dnn.allow_tf32) == (False, False)
        assert (mm.allow_tf32, dnn.allow_tf32) == (True, True)
        mm.allow_tf32, dnn.allow_tf32 = False, True  # torch's defaults
        with pytest.raises(RuntimeError), cn.tf32_mode(CUDA, allow=True):
            assert (mm.allow_tf32, dnn.allow_tf32) == (True, True)
            raise RuntimeError("job fails")
        assert (mm.allow_tf32, dnn.allow_tf32) == (False, True)  # restored after an error
        with cn.tf32_mode(CPU, allow=False):  # CPU jobs: switches untouched
            assert (mm.allow_tf32, dnn.allow_tf32) == (False, True)
    finally:
        mm.allow_tf32, dnn.allow_tf32 = old


def test_compile_cache_folder_selection(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(cn.CACHE_ENV, raising=False)
    assert cn.compile_cache_dir(cn.DEFAULT_COMPILE_CACHE) == tmp_path / "results/.cache/torch_compile"
    assert cn.compile_cache_dir("") is None  # torch's own default
    monkeypatch.setenv(cn.CACHE_ENV, "/shared/inductor")
    assert cn.compile_cache_dir(None) == cn.Path("/shared/inductor")
    assert cn.compile_cache_dir("mine") == tmp_path / "mine"  # the config wins
    folder = tmp_path / "results/.cache/torch_compile"
    with cn.compile_cache(folder) as got:
        assert got == folder and folder.is_dir() and os.environ[cn.CACHE_ENV] == str(folder)
    assert os.environ[cn.CACHE_ENV] == "/shared/inductor"
    monkeypatch.delenv(cn.CACHE_ENV)
    with cn.compile_cache(folder):
        assert os.environ[cn.CACHE_ENV] == str(folder)
    assert cn.CACHE_ENV not in os.environ
    with cn.compile_cache(None):
        assert cn.CACHE_ENV not in os.environ


class _Fake(Embedder):
    backend = "fake"
    supports_cuda = True

    def embed(self, crops: torch.Tensor) -> np.ndarray:  # pragma: no cover - not called
        raise AssertionError


@pytest.mark.parametrize(("amp", "tf32", "compiled", "invariant", "says"), [
    ("none", False, False, True, "<= 1e-06 (not bit-equal"),
    ("none", True, False, False, "1.3e-04"),
    ("fp16", False, False, False, "4.7e-04 at batch 7, 3.5e-04 at batch 1"),
    ("bf16", False, False, False, "not measured"),
    ("none", False, True, False, "torch.compile"),
])
def test_batch_invariance_rule_on_cuda(amp, tf32, compiled, invariant, says):
    emb = _Fake("m", device=CUDA, amp=amp)
    emb.compiled = compiled
    info = batch_invariance(emb, 8, tf32=tf32)
    assert info["batch_invariant"] is invariant and info["tf32"] is tf32
    assert says in info["batch_invariance"] and info["forward_batch"] is None
    cpu = batch_invariance(_Fake("m", device=CPU, amp=amp), 8, tf32=True)  # CPU: as before
    assert cpu == {"batch_invariant": True, "forward_batch": 8,
                   "batch_invariance": "every CPU forward has exactly 8 crops (the last "
                                       "micro-batch padded with blank crops)"}


def test_resolve_mode_cpu_as_before_half_on_cuda():
    for amp, want in (("none", "frozen"), ("fp16", "frozen"), ("bf16", "eager")):
        assert inf.resolve_mode("auto", CPU, amp) == want
    assert [inf.resolve_mode("auto", CUDA, a) for a in ("none", "fp16", "bf16")] == \
        ["eager", "half", "half"]
    with pytest.raises(ValueError, match="half needs embed.amp fp16 or bf16"):
        inf.resolve_mode("half", CUDA, "none")


@pytest.mark.parametrize(("arch", "fp32"), [
    ("r18", {"fc", "features"}), ("mbf", {"conv_sep", "features"}),
    ("vit_t", {"norm", "feature", "pos_embed", "mask_token"})])
def test_half_model_keeps_arcface_torchs_fp32_parts(arch, fp32):
    model = build_backbone(arch).eval()
    half = inf.half_model(model, torch.float16)
    assert set(type(model).fp32_modules) == fp32
    layer_norms = {f"{n}.{p}" for n, m in half.named_modules()
                   if isinstance(m, torch.nn.LayerNorm) for p, _ in m.named_parameters()}
    assert bool(layer_norms) == (arch == "vit_t")
    for name, tensor in [*half.named_parameters(), *half.named_buffers()]:
        if not tensor.is_floating_point():
            continue
        kept = name.split(".")[0] in fp32 or name in layer_norms
        assert tensor.dtype == (torch.float32 if kept else torch.float16), name
    assert all(p.dtype == torch.float32 for p in model.parameters())  # original untouched


def test_half_model_on_cpu_matches_eager_and_falls_back(caplog, monkeypatch):
    """bf16 on CPU (slow there: 2 crops) runs the same code as fp16/bf16 on CUDA."""
    torch.manual_seed(0)
    monkeypatch.setattr(inf, "CHECK_BATCH", 2)
    model = build_backbone("mbf").eval()
    with caplog.at_level(logging.INFO, "facecast.embed"):
        half, mode = inf.build_half(model, CPU, "bf16", "m")
    assert mode == "half" and "features match the eager model" in caplog.text
    assert half.features.layers[2].weight.dtype == torch.float32
    assert half.layers[0].layers[0].weight.dtype == torch.bfloat16
    with caplog.at_level(logging.WARNING, "facecast.embed"):
        assert inf.build_half(model, CPU, "fp16", "m")[1] == "eager"  # fp16 ignored on CPU
        assert "needs reduced precision that runs" in caplog.text
        half_model = inf.half_model

        def broken(m, dtype):  # a half model whose features are wrong must not be used
            bad = half_model(m, dtype)
            bad.features.layers[3].bias.data.add_(100.0)
            return bad
        monkeypatch.setattr(inf, "half_model", broken)
        assert inf.build_half(model, CPU, "bf16", "m")[1] == "eager"
        assert "differ from the eager model" in caplog.text


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 8, stride=8)
        self.fc = torch.nn.Linear(4 * 14 * 14, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def test_compile_is_checked_and_falls_back(caplog):
    torch.manual_seed(0)
    model = _Tiny().eval()
    compiled, seconds = inf.compile_model(model, model, CPU, "none", "m", backend="eager")
    assert compiled is not model and seconds is not None and seconds > 0
    x = torch.rand(5, 3, 112, 112)
    assert torch.equal(inf.forward(compiled, x, CPU, "none"), inf.forward(model, x, CPU, "none"))

    def failing(gm, example_inputs):
        raise RuntimeError("no compiler here")

    def negated(gm, example_inputs):
        return lambda *args: tuple(-o for o in gm(*args))

    with caplog.at_level(logging.WARNING, "facecast.embed"):
        assert inf.compile_model(model, model, CPU, "none", "m", backend=failing) == (model, None)
        assert "torch.compile failed" in caplog.text
        assert inf.compile_model(model, model, CPU, "none", "m", backend=negated) == (model, None)
        assert "compiled model's features differ" in caplog.text


@pytest.fixture(scope="module")
def mbf_weights(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("w") / "backbone.pth"
    torch.save(build_backbone("mbf").eval().state_dict(), path)
    return str(path)


def test_cpu_path_unchanged(mbf_weights):
    """On CPU nothing of issue 40 runs: float32 weights, no compile, no padding, the literal
    forward (``inference: eager``; the default ``frozen`` path is untouched code, tested in
    tests/test_embed_cpu_speed.py), provenance without compile keys."""
    emb = build_embedder("m", {"backend": "arcface_torch", "weights": mbf_weights,
                               "inference": "eager"}, device="cpu", amp="fp16")
    assert emb.inference == "eager" and not emb.compiled
    assert all(p.dtype == torch.float32 for p in emb.model.parameters())
    prov = emb.provenance()
    assert "compile" not in prov and "compile_seconds" not in prov
    model = build_backbone("mbf").eval()
    model.load_state_dict(torch.load(mbf_weights, weights_only=True))
    crops = torch.randint(0, 256, (3, 112, 112, 3), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        scaled = crops.permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
        want, want1 = model(scaled).numpy(), model(scaled[:1]).numpy()
    assert np.array_equal(emb.embed(crops), want)  # bit for bit
    assert np.array_equal(emb.embed(crops[:1]), want1)  # a single crop is not padded


def test_stage_compiles_in_the_shared_cache(mbf_weights, tmp_path, monkeypatch):
    """embed_shard points TorchInductor's cache at embed.compile_cache while the model is
    built (compile_model replaced by a spy that records it: a compile on 2 CPU cores
    costs minutes), then restores it; provenance has the folder and the time."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(cn.CACHE_ENV, raising=False)
    seen = []

    def spy(model, eager, device, amp, name, channels_last=False):
        seen.append(os.environ.get(cn.CACHE_ENV))
        return model, 0.5  # compile_model itself: test_compile_is_checked_and_falls_back
    monkeypatch.setattr(arcface_embedder, "compile_model", spy)
    rng = np.random.default_rng(0)
    crops = [encode_png(rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)) for _ in range(3)]
    pq.write_table(pa.table({"image_id": ["a", "b", "c"], "status": ["ok"] * 3,
                             "message": [None] * 3, "crop_arcface": crops}), "faces.parquet")
    model = {"backend": "arcface_torch", "weights": mbf_weights, "inference": "eager",
             "compile": True}
    out = embed_shard("faces.parquet", "emb.parquet", "m", model,
                      {"device": "cpu", "batch_size": 2}, threads=1)
    assert (out["status"] == "ok").all()
    assert seen == [str(tmp_path / "results/.cache/torch_compile")]
    assert cn.CACHE_ENV not in os.environ and (tmp_path / "results/.cache/torch_compile").is_dir()
    prov = read_provenance("emb.parquet")
    assert prov["compile"] is True and prov["compile_seconds"] == 0.5
    assert prov["compile_cache"] == "results/.cache/torch_compile"


def test_config_keys_are_checked(tmp_path):
    weights = tmp_path / "backbone.pth"
    weights.write_bytes(b"x")
    base = {"models": {"m": {"backend": "arcface_torch", "weights": str(weights),
                             "inference": "half"}}}
    errs = half_errors({"embed": {**base, "amp": "none"}})
    assert len(errs) == 1 and errs[0].startswith("embed.models.m.inference: half")
    assert half_errors({"embed": {**base, "amp": "fp16"}}) == []
    onnx = {"embed": {"models": {"o": {"backend": "onnx", "weights": str(weights),
                                       "compile": True}}}}
    assert any(e.startswith("embed.models.o.compile: is an option of backend arcface_torch")
               for e in config_errors(onnx))
    schema = str(REPO / "workflow/schemas/config.schema.yaml")
    with open(REPO / "config.yaml") as fh:
        shipped = yaml.safe_load(fh)
    for bad, key in (({"tf32": "yes"}, "embed.tf32"),
                     ({"compile_cache": 3}, "embed.compile_cache"),
                     ({"models": {"m": {"backend": "arcface_torch", "compile": "on"}}},
                      "embed.models.m.compile")):
        cfg = {**copy.deepcopy(shipped), "embed": bad}
        with pytest.raises(ConfigError, match=f"{key}: "):
            validate_config(cfg, schema)
    filled = {**copy.deepcopy(shipped), "embed": {}}
    validate_config(filled, schema)
    assert filled["embed"]["tf32"] is False
    assert filled["embed"]["compile_cache"] == cn.DEFAULT_COMPILE_CACHE
