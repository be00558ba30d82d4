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
from facecast.faces.cuda_fp32 import cuda_fp32, cuda_numerics_state, on_cuda
from facecast.io.parquet_io import read_provenance

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning"),
              pytest.mark.cuda]  # the GPU check runs this file (pytest -m cuda)
CUDA = torch.device("cuda")  # a device object: no GPU needed to build it
CPU = torch.device("cpu")


def _switches() -> tuple:
    mm, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    return mm.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark


@pytest.fixture
def torch_switches():
    """The TF32 switches and cuDNN's autotuner as torch had them, restored after the test."""
    old = _switches()
    yield
    mm, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    mm.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark = old


def test_cuda_fp32_sets_and_restores_every_switch(torch_switches):
    """One context for every CUDA stage (issue 48 item 2): TF32 off (or on), the autotuner
    as asked, everything restored after the block and after an error; no-op off CUDA."""
    mm, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    mm.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark = "tf32", "tf32", True
    with cuda_fp32(CUDA) as applied:
        assert applied is True and _switches() == ("ieee", "ieee", False)
        assert cuda_numerics_state() == {"tf32_matmul": False, "tf32_conv": False,
                                         "cudnn_benchmark": False}
    assert _switches() == ("tf32", "tf32", True)
    mm.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark = "ieee", "tf32", False
    with pytest.raises(RuntimeError, match="job fails"), \
            cuda_fp32("cuda:0", tf32=True, benchmark=True):
        assert _switches() == ("tf32", "tf32", True)
        raise RuntimeError("job fails")
    assert _switches() == ("ieee", "tf32", False)  # restored after an error
    for device in (CPU, "cpu", None):  # CPU jobs: switches untouched
        with cuda_fp32(device) as applied:
            assert applied is False and _switches() == ("ieee", "tf32", False)
    assert on_cuda("auto") is torch.cuda.is_available() and on_cuda("cuda:1")
    assert not on_cuda("mps")


def test_cuda_fp32_honours_float32_matmul_precision(torch_switches):
    """torch.set_float32_matmul_precision('high') (TF32 matmuls) is off inside the block,
    readable there (mixing the legacy allow_tf32 flags with it raised a RuntimeError) and
    back after."""
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        with cuda_fp32(CUDA):
            assert torch.backends.cuda.matmul.fp32_precision == "ieee"
            torch.get_float32_matmul_precision()  # raised with the legacy flags
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        torch.set_float32_matmul_precision(old)


def test_every_cuda_stage_runs_inside_the_context():
    """faces, embed, attributes (scoring and training), mining and identification enter
    cuda_fp32 where they run CUDA work (source-level: no GPU here)."""
    uses = {"faces/stage.py": "cuda_fp32(detector.device",
            "embed/stage.py": "cuda_fp32(\"cuda\" if cuda else \"cpu\", tf32=",
            "attributes/stage.py": "with cuda_fp32(device):",
            "analysis/stage.py": "with cuda_fp32(cfg.device):",
            "identification/stage.py": "with cuda_fp32(device):"}
    src = REPO / "src" / "facecast"
    for path, text in uses.items():
        body = (src / path).read_text(encoding="utf-8")
        assert text in body and "allow_tf32" not in body, path
    attributes = (src / "attributes/stage.py").read_text(encoding="utf-8")
    assert attributes.count("with cuda_fp32(device):") == 2  # score_shard and train_model


@pytest.mark.parametrize(("amp", "tf32", "compiled", "autotune"), [
    ("none", False, False, False), ("none", True, False, True), ("fp16", False, False, True),
    ("bf16", False, False, True), ("none", False, True, True)])
def test_autotuner_only_where_no_invariance_is_claimed(amp, tf32, compiled, autotune):
    """issue 48 item 3: batch_invariant true never comes with cudnn.benchmark on."""
    assert cn.cudnn_benchmark(amp, tf32, compiled) is autotune
    claim = cn.cuda_batch_invariance(amp, tf32, compiled)["batch_invariant"]
    assert claim is (not autotune)
    if claim:
        assert "autotuner off" in cn.cuda_batch_invariance(amp, tf32, compiled)[
            "batch_invariance"]


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
        ["eager", "half", "eager"]  # bf16 stays eager (issue 48 item 4)
    for amp in ("none", "bf16"):
        with pytest.raises(ValueError, match=f"half needs embed.amp fp16 .*got amp {amp}"):
            inf.resolve_mode("half", CUDA, amp)


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

    def nan(gm, example_inputs):
        return lambda *args: tuple(o * float("nan") for o in gm(*args))

    with caplog.at_level(logging.WARNING, "facecast.embed"):
        assert inf.compile_model(model, model, CPU, "none", "m", backend=failing) == (model, None)
        assert "torch.compile failed" in caplog.text
        assert inf.compile_model(model, model, CPU, "none", "m", backend=negated) == (model, None)
        assert "compiled model's features differ" in caplog.text
        caplog.clear()
        # a compiled model that gives NaN is dropped (issue 48 item 4: `cos < MIN_COSINE`
        # is False for NaN and kept it)
        assert inf.compile_model(model, model, CPU, "none", "m", backend=nan) == (model, None)
        assert "min cosine nan" in caplog.text


def test_min_cosine_and_the_check_reject_non_finite_features():
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert inf.min_cosine(a, a) == 1.0 and inf.matches(1.0)
    assert inf.min_cosine(a, torch.tensor([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(2 ** -0.5)
    for bad in (float("nan"), float("inf")):
        b = a.clone()
        b[1, 0] = bad
        assert np.isnan(inf.min_cosine(a, b)) and np.isnan(inf.min_cosine(b, a))
    assert not inf.matches(float("nan")) and not inf.matches(0.99989)
    assert inf.matches(inf.MIN_COSINE)


def test_the_build_check_runs_on_faces_not_noise():
    """issue 48 item 4: the half/compile check inputs are rendered faces (smooth skin, a
    background), seeded: the same every build."""
    x = inf.check_inputs()
    assert x.shape == (inf.CHECK_BATCH, 3, 112, 112) and x.dtype == torch.float32
    assert torch.equal(x, inf.check_inputs())
    assert float(x.min()) >= -1.0 and float(x.max()) <= 1.0
    # neighbouring pixels of a face differ by a few grey levels; of uniform noise by ~1/3
    step = float((x[..., 1:] - x[..., :-1]).abs().mean())
    noise = torch.rand(3, 3, 112, 112, generator=torch.Generator().manual_seed(0)) * 2 - 1
    assert step < 0.1 < float((noise[..., 1:] - noise[..., :-1]).abs().mean())


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
    for amp in ("none", "bf16"):
        errs = half_errors({"embed": {**base, "amp": amp}})
        assert len(errs) == 1 and errs[0].startswith("embed.models.m.inference: half")
        assert f"embed.amp is {amp}" in errs[0]
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (embed_shard on "
                    "CUDA; the CPU parts of its settings are tested above)")
def test_stage_on_cuda_runs_its_claim(mbf_weights, tmp_path, torch_switches):
    """On a GPU: an fp32 embed job runs with TF32 and the autotuner off and says so
    (batch_invariant true, cudnn_benchmark false), restores torch's switches, and its
    embeddings equal the CPU job's to 1e-5 (float32 sums in another order)."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    rng = np.random.default_rng(0)
    crops = [encode_png(rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)) for _ in range(9)]
    faces = tmp_path / "faces.parquet"
    pq.write_table(pa.table({"image_id": [str(i) for i in range(9)], "status": ["ok"] * 9,
                             "message": [None] * 9, "crop_arcface": crops}), faces)
    model = {"backend": "arcface_torch", "weights": mbf_weights}
    out = {}
    for device in ("cpu", "cuda"):
        out[device] = embed_shard(faces, tmp_path / f"{device}.parquet", "m", model,
                                  {"device": device, "batch_size": 4}, threads=1)
    prov = read_provenance(tmp_path / "cuda.parquet")
    assert prov["batch_invariant"] is True and prov["cudnn_benchmark"] is False
    assert prov["tf32"] is False
    assert torch.backends.cudnn.benchmark is True  # restored
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    a, b = (np.stack(out[d]["embedding"].to_numpy()) for d in ("cpu", "cuda"))
    assert np.abs(a - b).max() <= 1e-5


def test_loader_splits_every_batch_across_the_decode_threads(monkeypatch):
    """issue 48 item 6: a batch is decoded by all threads (parts of batch/threads crops,
    at least MIN_PART), batches keep their exact size and content, errors stay in place."""
    from facecast.embed import data

    assert [data.batch_parts(1024, w) for w in (0, 1, 12, 14, 200)] == [1024, 1024, 86, 74, 16]
    assert data.batch_parts(8, 4) == 8  # never below MIN_PART, never above the batch
    rng = np.random.default_rng(0)
    crops = [encode_png(rng.integers(0, 255, (112, 112, 3), dtype=np.uint8)) for _ in range(70)]
    crops[33] = b"not a png"
    rows = np.arange(70)
    calls = []
    decode = data.CropBatches.decode

    def spy(self, start, stop):
        calls.append((start, stop))
        return decode(self, start, stop)
    monkeypatch.setattr(data.CropBatches, "decode", spy)
    inline = list(data.crop_loader(crops, rows, batch_size=64, size=112, device=CPU))
    assert calls == [(0, 64), (64, 70)]
    calls.clear()
    split = list(data.crop_loader(crops, rows, batch_size=64, size=112, device=CPU,
                                  num_workers=4))
    assert sorted(calls) == [(0, 16), (16, 32), (32, 48), (48, 64), (64, 70)]
    assert [len(b[0]) for b in split] == [64, 6]
    for a, b in zip(inline, split, strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
        assert a[3] == b[3]
    assert split[0][3][33].startswith("crop does not decode") and not split[0][2][33]


def test_attribute_and_identification_work_runs_in_fp32(monkeypatch, torch_switches):
    """The CUDA work of attributes (scoring, training) and of the 1:N search sees TF32 and
    the autotuner off (a ``cuda`` device string needs no GPU for the switches), CPU-only
    scorers leave them alone, and they are back after."""
    import pandas as pd

    from facecast.attributes import scoring, stage, trainer
    from facecast.identification import stage as ident

    mm, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    mm.fp32_precision, conv.fp32_precision, torch.backends.cudnn.benchmark = "tf32", "tf32", True
    seen = []

    def spy(*args, **kwargs):
        seen.append(_switches())
        return pd.DataFrame()
    monkeypatch.setattr(scoring, "score_shard", spy)
    monkeypatch.setattr(trainer, "train_attribute_model", spy)
    monkeypatch.setattr(stage, "resolve_device", lambda d: d)

    class Stop(Exception):
        pass

    def search_spy(*args, **kwargs):  # the 1:N search: record, then stop the job
        seen.append(_switches())
        raise Stop
    monkeypatch.setattr(ident, "search", search_spy)
    stage.score_shard("age_gender", "f", "o", {"device": "cuda"})
    stage.score_shard("native", "f", "o", {"device": "cuda"})  # computes on the CPU
    stage.train_model("m", [], "c", "e", "r", {}, seed=0, device="cuda")
    gal = pd.DataFrame({"image_id": ["a"], "identity": ["x"]})
    probes = pd.DataFrame({"image_id": ["b"], "identity": ["x"], "role": ["mated"]})
    with pytest.raises(Stop):
        ident._search(gal, probes, np.array(["a", "b"]), np.eye(2, dtype=np.float32), [1],
                      {"device": "cuda:0"})
    off, untouched = ("ieee", "ieee", False), ("tf32", "tf32", True)
    assert seen == [off, untouched, off, off]
    assert _switches() == untouched  # restored, also after the search's error
