"""dlib_resnet's two engines: dlib's own forward vs the torch engine, faces/s per core.

Prints faces per second of one core: on the CPU, faces per CPU second of this process
with one torch thread (``torch.set_num_threads(1)``; dlib-bin always computes on one
core), so other work on a shared machine slows the figures less than wall time would; on
CUDA, faces per wall second. Rows:

  * ``dlib``: ``dlib.face_recognition_model_v1.compute_face_descriptor`` on a list of
    150x150 uint8 chips (``engine: dlib``; the wheel has no BLAS),
  * the torch engine's network (:class:`facecast.embed.dlib_dnn.DlibResNet`, each
    ``affine_`` folded into its convolution) at ``--batch-sizes``, three ways:
    ``nchw`` (plain contiguous tensors), ``channels_last`` (what the engine runs) and
    ``frozen`` (``torch.jit.trace`` + ``freeze`` + ``optimize_for_inference``),
  * ``embed``: the whole ``DlibEmbedder.embed`` of the torch engine, uint8 ArcFace crops
    in host memory in (upload and chip resampling included: on CUDA the chips are cut on
    the GPU, :mod:`facecast.embed.dlib_chips`), descriptors in host memory out,

with the speed-up over dlib and the largest |difference| of a descriptor coordinate between
the engines on the same chips (the chips are face-like: the astronaut's face, shifted and
re-lit). Every figure is the best of 3 timed passes. Last lines: on CUDA, whether the chips
cut on the GPU equal the CPU path's bit for bit, and issue 40.4's goal at the largest batch
size, ``dlib embed within 2x of network: PASS|FAIL (ratio R)`` (R = network-alone
``channels_last`` faces/s over ``embed`` faces/s); on the CPU the ratio is printed with
``n/a`` for the verdict (the goal is for CUDA). The default is quick (well under a minute on
one loaded core):

    .venv/bin/python benchmarks/dlib_engine.py
    .venv/bin/python benchmarks/dlib_engine.py --n 256 --dlib-n 64 --batch-sizes 1,8,16,64
    python benchmarks/dlib_engine.py --device cuda --batch-sizes 64,256 --n 4096  # + GPU rows

The figures depend on the machine and its load (two cores shared with other work here);
compare rows of one run.
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import numpy as np
import torch
from skimage.data import astronaut

from facecast.embed.dlib_chips import chip_plan, device_chips
from facecast.embed.dlib_resnet import (
    DlibEmbedder,
    arcface_to_dlib_chips,
    chip_sampling_grid,
    default_dlib_weights,
)


def face_crops(n: int, size: int = 112, seed: int = 0) -> np.ndarray:
    """``n`` uint8 face-like crops ``(n, size, size, 3)`` (the astronaut's face, shifted,
    re-lit and noisy)."""
    rng = np.random.default_rng(seed)
    face = torch.from_numpy(astronaut()[20:200, 140:320]).permute(2, 0, 1).float()[None]
    base = torch.nn.functional.interpolate(face, size=(size + 16, size + 16), mode="bilinear",
                                           antialias=True)[0].permute(1, 2, 0).numpy()
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        dy, dx = rng.integers(0, 16, 2)
        img = base[dy:dy + size, dx:dx + size] * rng.uniform(0.7, 1.2)
        out[i] = np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)
    return out


#: each figure is the best of this many timed passes (the machine is shared: best-of
#: filters out the passes other work slowed down)
REPEAT = 3


def faces_per_s(fn, items: list, n_faces: int) -> float:
    """Faces per second of ``fn`` over ``items``: the best of :data:`REPEAT` passes, after
    one warm-up call per distinct input shape."""
    seen = set()
    for item in items:
        if tuple(item.shape) not in seen:
            seen.add(tuple(item.shape))
            fn(item)
    clock = time.perf_counter if torch.cuda.is_available() else time.process_time
    best = 0.0
    for _ in range(REPEAT):
        t = clock()
        for item in items:
            fn(item)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = max(best, n_faces / max(clock() - t, 1e-9))
    return best


def batches(x: torch.Tensor, bs: int) -> list[torch.Tensor]:
    return [x[i:i + bs] for i in range(0, len(x), bs)]


def frozen(net: torch.nn.Module, device: torch.device) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript's deprecation and tracer notes
        with torch.inference_mode():
            traced = torch.jit.trace(copy.deepcopy(net), torch.zeros(2, 3, 150, 150,
                                                                     device=device),
                                     check_trace=False)
        return torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))


def network_rows(emb: DlibEmbedder, chips: np.ndarray, batch_sizes: list[int],
                 device: torch.device) -> list[tuple[str, int, float]]:
    """(variant, batch size, faces/s) of the torch network on ``chips``."""
    x = torch.from_numpy(chips).to(device).permute(0, 3, 1, 2).float()
    nchw = copy.deepcopy(emb.net).to(memory_format=torch.contiguous_format)
    variants = {"nchw": (nchw, x.contiguous()),
                "channels_last": (emb.net, x.contiguous(memory_format=torch.channels_last))}
    if device.type == "cpu":
        variants["frozen"] = (frozen(nchw, device), x.contiguous())
    rows = []
    with torch.inference_mode():
        for name, (net, xin) in variants.items():
            for bs in batch_sizes:
                rows.append((name, bs, faces_per_s(net, batches(xin, bs), len(xin))))
    return rows


#: issue 40.4: on CUDA, ``embed`` at least half as fast as the network alone
GOAL_RATIO = 2.0


def chip_check(crops: torch.Tensor, cpu_chips: np.ndarray, device: torch.device) -> str:
    """Whether chips cut on ``device`` equal the CPU path's, as one printable line."""
    plan = chip_plan(chip_sampling_grid(int(crops.shape[1])), int(crops.shape[1])).to(device)
    got = device_chips(crops.to(device), plan).cpu().numpy()
    differ = int((got != cpu_chips).sum())
    return (f"{device.type} chips == CPU chips: {'PASS' if differ == 0 else 'FAIL'} "
            f"({differ} of {got.size} values differ)")


def goal_line(network: float, embed: float, bs: int, device: torch.device) -> str:
    """The goal's verdict: network-alone over whole-``embed`` faces/s at batch ``bs``."""
    ratio = network / max(embed, 1e-9)
    head = (f"batch {bs}: network alone {network:.1f} faces/s, whole embed {embed:.1f} "
            f"faces/s\ndlib embed within 2x of network: ")
    if device.type != "cuda":
        return head + f"n/a (the goal is for CUDA; {device.type} ratio {ratio:.2f})"
    return head + f"{'PASS' if ratio <= GOAL_RATIO else 'FAIL'} (ratio {ratio:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="faces per torch figure")
    ap.add_argument("--dlib-n", type=int, default=16, help="faces for dlib's figure")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    crops = face_crops(max(args.n, args.dlib_n))
    chips = arcface_to_dlib_chips(torch.from_numpy(crops), chip_sampling_grid(112))
    print(f"weights: {default_dlib_weights()}; {args.threads} torch thread(s); "
          f"device {device}")

    dlib_emb = DlibEmbedder("dlib", engine="dlib")
    ref = dlib_emb.embed_chips(chips[:args.dlib_n])
    dlib_fps = faces_per_s(dlib_emb.embed_chips, [chips[:args.dlib_n]], args.dlib_n)
    print(f"dlib's forward (compute_face_descriptor, one core): {dlib_fps:.1f} faces/s")

    emb = DlibEmbedder("dlib", engine="torch", device=device)
    diff = np.abs(emb.embed_chips(chips[:args.dlib_n]) - ref).max()
    print(f"max |torch - dlib| per descriptor coordinate: {diff:.2e}")
    print(f"{'variant':<14} {'batch':>5} {'faces/s':>9} {'x dlib':>7}")
    net_fps: dict[tuple[str, int], float] = {}
    embed_fps: dict[int, float] = {}
    for name, bs, fps in network_rows(emb, chips[:args.n], sizes, device):
        print(f"{name:<14} {bs:>5} {fps:>9.1f} {fps / dlib_fps:>7.1f}")
        net_fps[(name, bs)] = fps
    tcrops = torch.from_numpy(crops[:args.n])
    for bs in sizes:
        fps = faces_per_s(emb.embed, batches(tcrops, bs), args.n)
        embed_fps[bs] = fps
        print(f"{'embed':<14} {bs:>5} {fps:>9.1f} {fps / dlib_fps:>7.1f}")
    if device.type != "cpu":
        print(chip_check(tcrops, chips[:args.n], device))
    print(goal_line(net_fps[("channels_last", max(sizes))], embed_fps[max(sizes)],
                    max(sizes), device))


if __name__ == "__main__":
    main()
