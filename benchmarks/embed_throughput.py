"""Embedding throughput: crop decoding and each backend, at a few batch sizes.

Prints a table of images per second:
- ``decode``: PNG bytes -> uint8 tensor batches through the decode threads (``--workers``),
- ``model``: the backend on already-decoded crops (host tensor in, numpy features out),
- ``end-to-end``: PNG bytes from memory -> decode in workers -> model -> features, the way
  ``facecast.embed.stage`` runs a shard.

iresnet/facenet use randomly initialised weights in the real formats unless
``--iresnet-weights`` / ``--facenet-weights`` is given (speed does not depend on the values).

With ``dlib`` among the backends it also prints dlib's images/s from one Python thread and
from two (and CPU seconds per wall second): dlib-bin computes on one core holding the GIL,
which is why ``facecast.embed.targets.job_threads`` asks Snakemake for one thread per dlib
job.

The default (no arguments) is a quick CPU smoke figure: 64 images, batch 32, iResNet-18;
it finishes in well under 2 minutes on 2 cores. Bigger runs go behind flags:

    .venv/bin/python benchmarks/embed_throughput.py                      # CPU, quick
    python benchmarks/embed_throughput.py --n 512 --batch-sizes 16,64 --arch r100  # CPU, full
    python benchmarks/embed_throughput.py --device cuda --amp fp16 --n 20000 \\
        --batch-sizes 256,512,1024 --workers 12 --backends iresnet --arch r100  # GPU goal
    # model speed (issue 40): half weights + channels-last (the CUDA fp16 default), then
    # compiled; each prints "PASS/FAIL: r100 fp16 model-only ... (goal >= 16000)" and the
    # compile seconds per job (--inference eager: autocast alone, for comparison)
    python benchmarks/embed_throughput.py --device cuda --amp fp16 --n 20480 \
        --batch-sizes 512 --backends iresnet --arch r100 [--compile]

``--decode-scaling`` instead prints crops/s of decoding 112 px PNG crops in batches of 64
on 1, 2, 4, 8 and 16 threads (up to ``os.cpu_count()``) with the stage's decoder
(:class:`facecast.embed.data.CropBatches`: OpenCV, which releases the GIL) and with Pillow
(the decoder before; it holds the GIL for part of each crop), ``--decode-n`` crops (default:
enough for :data:`BATCHES_PER_THREAD` batches per thread at the most threads, so the
threads have work to scale on), best of ``--decode-repeat``; its last line is ``decode
scaling: 1 thread A crops/s, N threads B crops/s, ratio R (...)`` for the stage's decoder,
with the crops, the batches per thread, ``os.cpu_count()`` and the physical cores that
``lscpu`` counts (16 VM cores may be 8 physical cores with two threads each). Seconds on 2
cores:

    python benchmarks/embed_throughput.py --decode-scaling

``--per-arch`` instead prints faces/s of the ``arcface_torch`` backend for each of its
architectures (r18 ... r200, mbf, mbf_large, vit_t, vit_s, vit_b; random weights saved
and loaded as ``backbone.pth``): on the CPU with ``--cpu-threads`` (2) threads for
``--cpu-n`` (16) faces in batches of 16, and, where CUDA is available, for ``--gpu-archs``
(r100, vit_b) on the GPU in fp32 and fp16 autocast at ``--batch-sizes`` over ``--n`` faces:

    python benchmarks/embed_throughput.py --per-arch                     # CPU rows only
    python benchmarks/embed_throughput.py --per-arch --n 4096 --batch-sizes 128,512  # + GPU
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from skimage.data import astronaut

from facecast.embed.base import active_amp, resolve_device
from facecast.embed.cuda_numerics import cudnn_benchmark
from facecast.embed.data import crop_loader
from facecast.embed.lbp import CovarianceAccumulator, fit_whitening, lbp_features, save_fit
from facecast.embed.registry import build_embedder
from facecast.embed.stage import embed_crops
from facecast.faces.crops import encode_png
from facecast.faces.cuda_fp32 import cuda_fp32


def make_pngs(n: int, size: int, seed: int = 0) -> list[bytes]:
    """``n`` distinct face-like PNG crops (shifted, re-lit astronaut face plus noise)."""
    rng = np.random.default_rng(seed)
    face = torch.from_numpy(astronaut()[20:200, 140:320]).permute(2, 0, 1).float()[None]
    base = torch.nn.functional.interpolate(face, size=(size + 16, size + 16), mode="bilinear",
                                           antialias=True)[0].permute(1, 2, 0).numpy()
    uniq = []
    for _ in range(min(n, 64)):
        dy, dx = rng.integers(0, 16, 2)
        img = base[dy:dy + size, dx:dx + size] * rng.uniform(0.7, 1.2)
        img = img + rng.normal(0, 4, img.shape)
        uniq.append(encode_png(np.clip(img, 0, 255).astype(np.uint8)))
    return [uniq[i % len(uniq)] for i in range(n)]


def timed(fn, n_images: int, repeat: int = 1) -> float:
    fn()  # warm-up (allocations, cuDNN autotune, worker start)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return n_images * repeat / (time.perf_counter() - t)


def model_cfgs(args, tmp: Path, n_fit: int) -> dict[str, dict]:
    cfgs: dict[str, dict] = {}
    for b in args.backends.split(","):
        if b == "lbp":
            crops = np.stack([np.asarray(c) for c in _decode(make_pngs(n_fit, 112, seed=9))])
            acc = CovarianceAccumulator(lbp_features(crops[:1]).shape[1])
            acc.update(lbp_features(crops))
            save_fit(tmp / "lbp_fit.npz", fit_whitening(acc, 128), (1, 2), 7)
            cfgs["lbp"] = {"backend": "lbp", "_fit": str(tmp / "lbp_fit.npz")}
        elif b == "dlib":
            cfgs["dlib"] = {"backend": "dlib_resnet"}
        elif b == "iresnet":
            path = args.iresnet_weights
            if not path:
                from facecast.embed.iresnet import build_iresnet

                path = str(tmp / "backbone.pth")
                torch.save(build_iresnet(args.arch).state_dict(), path)
            cfgs[f"iresnet-{args.arch}"] = {"backend": "iresnet", "weights": path,
                                            "arch": args.arch, "inference": args.inference,
                                            "compile": args.compile}
        elif b == "facenet":
            path = args.facenet_weights
            if not path:
                from facenet_pytorch import InceptionResnetV1

                m = InceptionResnetV1(pretrained=None)
                m.logits = torch.nn.Linear(512, 8631)
                path = str(tmp / "20180402-114759-vggface2.pt")
                torch.save(m.state_dict(), path)
            cfgs["facenet"] = {"backend": "facenet", "weights": path}
        else:
            raise SystemExit(f"unknown backend {b}")
    return cfgs


def _decode(pngs: list[bytes]) -> list[np.ndarray]:
    from facecast.faces.crops import decode_png

    return [decode_png(p) for p in pngs]


def dlib_threads_figure(emb, decoded: torch.Tensor) -> str:
    """dlib on ``decoded`` crops from one Python thread and split over two: img/s and CPU
    seconds per wall second (about 1.0 for both when dlib holds the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    n = len(decoded)
    out = []
    for workers in (1, 2):
        parts = np.array_split(np.arange(n), workers)
        emb.embed(decoded[:1])
        w0, c0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda idx: emb.embed(decoded[idx]), parts))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        out.append(f"{workers} thread(s): {n / wall:.1f} img/s, {cpu / wall:.2f} CPU s per "
                   "wall s")
    return "dlib from Python threads: " + "; ".join(out)


def _pillow_batch(blobs: list[bytes], size: int) -> np.ndarray:
    """Pillow's decode of a batch (what the stage used before OpenCV), for comparison."""
    import io

    from PIL import Image

    out = np.zeros((len(blobs), size, size, 3), np.uint8)
    for i, b in enumerate(blobs):
        with Image.open(io.BytesIO(b)) as im:
            out[i] = np.asarray(im.convert("RGB"))
    return out


def decode_rate(decoder: str, pngs: list[bytes], threads: int, repeat: int,
                batch: int = 64) -> float:
    """Best crops/s over ``repeat`` runs of decoding ``pngs`` in batches on ``threads``
    threads, with the stage's decoder (``opencv``: CropBatches) or ``pillow``."""
    from facecast.embed.data import CropBatches
    from facecast.parallel import ordered_prefetch

    ds = CropBatches(pngs, np.arange(len(pngs)), batch, 112)
    if decoder == "opencv":
        load = ds.__getitem__
    else:
        def load(b: int) -> np.ndarray:
            return _pillow_batch(pngs[b * batch:(b + 1) * batch], 112)
    best = 0.0
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        for _ in ordered_prefetch(load, range(len(ds)), threads):
            pass
        best = max(best, len(pngs) / (time.perf_counter() - t))
    return best


#: --decode-scaling: batches of 64 crops per thread at the most threads, at least
BATCHES_PER_THREAD = 8


def physical_cores() -> int | None:
    """Physical cores as ``lscpu -p=CORE,SOCKET`` counts them (None without lscpu)."""
    import subprocess

    try:
        out = subprocess.run(["lscpu", "-p=CORE,SOCKET"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return len({line for line in out.splitlines() if line and not line.startswith("#")})


def decode_scaling(args) -> None:
    """crops/s of the stage's decoder and of Pillow at 1, 2, 4, 8, 16 threads (<= cores)."""
    import os

    cores = os.cpu_count() or 1
    counts = [t for t in (1, 2, 4, 8, 16) if t <= cores]
    n = args.decode_n or 64 * BATCHES_PER_THREAD * counts[-1]
    pngs = make_pngs(n, 112)
    per_thread = n / 64 / counts[-1]
    physical = physical_cores()
    print(f"decode 112 px PNG crops: {len(pngs)} crops, batches of 64 ({per_thread:.0f} per "
          f"thread at {counts[-1]} threads), os.cpu_count {cores}, physical cores "
          f"{physical if physical else 'unknown (no lscpu)'}, best of {args.decode_repeat}",
          flush=True)
    rates: dict[str, dict[int, float]] = {}
    for decoder in ("opencv", "pillow"):
        decode_rate(decoder, pngs[:256], 1, 1)  # warm-up (imports, allocator)
        rates[decoder] = {t: decode_rate(decoder, pngs, t, args.decode_repeat) for t in counts}
        print(f"  {decoder:<8}" + "".join(f"{t:>4} thr {r:>9.0f}/s" for t, r in
                                          rates[decoder].items()), flush=True)
    a, b = rates["opencv"][1], rates["opencv"][counts[-1]]
    print(f"decode scaling: 1 thread {a:.0f} crops/s, {counts[-1]} threads {b:.0f} crops/s, "
          f"ratio {b / a:.2f} ({n} crops, {per_thread:.0f} batches per thread; os.cpu_count "
          f"{cores}, physical cores {physical or 'unknown'})")


def per_arch(args) -> None:
    """faces/s of every arcface_torch arch on the CPU, and of ``--gpu-archs`` on CUDA."""
    from facecast.embed.arcface.weights import ARCHS, build_backbone

    archs = ARCHS if args.archs == "all" else tuple(args.archs.split(","))
    gpu_archs = [a for a in args.gpu_archs.split(",") if a]
    cuda = torch.cuda.is_available() and args.device != "cpu"
    n_max = max(args.cpu_n, args.n if cuda else 0)
    crops = torch.from_numpy(np.stack(_decode(make_pngs(n_max, 112))))
    rows = []
    torch.set_num_threads(args.cpu_threads)
    print(f"arcface_torch per arch: CPU {args.cpu_threads} threads, {args.cpu_n} faces, "
          f"batch 16" + (f"; GPU {torch.cuda.get_device_name()}, {args.n} faces" if cuda
                         else "; no GPU"), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in dict.fromkeys([*archs, *(gpu_archs if cuda else [])]):
            path = str(Path(tmp) / f"{arch}.pth")
            torch.save(build_backbone(arch).eval().state_dict(), path)
            cfg = {"backend": "arcface_torch", "arch": arch, "weights": path}
            runs = [("cpu", "none", 16, args.cpu_n)] if arch in archs else []
            if cuda and arch in gpu_archs:
                runs += [("cuda", amp, bs, args.n) for amp in ("none", "fp16")
                         for bs in (int(b) for b in args.batch_sizes.split(","))]
            for device, amp, bs, n in runs:
                torch.set_num_threads(args.cpu_threads if device == "cpu" else args.threads)
                emb = build_embedder(arch, cfg, device=device, amp=amp)
                batch = crops[:n].pin_memory() if device == "cuda" else crops[:n]

                emb.embed(batch[:bs if device == "cuda" else 2])  # warm-up (cuDNN autotune)
                if device == "cuda":
                    torch.cuda.synchronize()
                t = time.perf_counter()
                for i in range(0, n, bs):
                    emb.embed(batch[i:i + bs])  # features come back to the host: synced
                rows.append((arch, device, amp, bs, n / (time.perf_counter() - t)))
                print(f"  {arch:<10}{device:<6}{amp:<6}{bs:>6}{rows[-1][-1]:>12.1f} faces/s",
                      flush=True)
                del emb
            Path(path).unlink()
    print(f"\n{'arch':<10}{'device':<8}{'amp':<6}{'batch':>6}{'faces/s':>12}")
    for arch, dev, amp, bs, rate in rows:
        print(f"{arch:<10}{dev:<8}{amp:<6}{bs:>6}{rate:>12.1f}")


def same_model_line(emb, bs: int, model: float, e2e: float, workers: int) -> str:
    """``end to end vs model``: both figures of one embedder (the same model: compiled
    against compiled, eager against eager; issue 48 item 6) and their ratio."""
    what = "compiled" if getattr(emb, "compiled", False) else getattr(emb, "inference", "model")
    return (f"end to end vs model: {emb.name} {what} batch {bs}: model {model:.0f} faces/s, "
            f"end to end {e2e:.0f} faces/s ({workers} decode threads), ratio "
            f"{e2e / model:.3f}")


def model_goal(emb, args, bs: int, rate: float) -> str:
    """The iresnet model-only line: mode, compile time per job, and on CUDA for r100 fp16
    the PASS/FAIL of issue 40's goal (>= 16000 faces/s)."""
    compile_s = getattr(emb, "compile_seconds", None)
    line = (f"{emb.name} batch {bs}: inference {emb.inference}, compiled "
            f"{compile_s is not None}" + (f" (compile {compile_s:.1f} s per job; with it a job "
                                          f"of {args.n} faces runs at "
                                          f"{args.n / (args.n / rate + compile_s):.0f} faces/s)"
                                          if compile_s is not None else ""))
    if emb.device.type == "cuda" and args.arch == "r100" and args.amp == "fp16":
        verdict = "PASS" if rate >= 16000 else "FAIL"
        line += f"\n{verdict}: r100 fp16 model-only {rate:.0f} faces/s (goal >= 16000)"
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="images per measurement")
    ap.add_argument("--batch-sizes", default="32")
    ap.add_argument("--backends", default="lbp,dlib,iresnet,facenet")
    ap.add_argument("--arch", default="r18", help="iresnet depth (r100 is CAST's reference)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--amp", default="none", choices=["none", "fp16", "bf16"])
    ap.add_argument("--workers", type=int, default=0, help="PNG decode threads")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--iresnet-weights", default="")
    ap.add_argument("--facenet-weights", default="")
    ap.add_argument("--inference", default="auto",
                    help="iresnet inference mode (auto = half weights + channels-last on "
                         "CUDA under fp16/bf16; eager = autocast alone)")
    ap.add_argument("--compile", action="store_true",
                    help="iresnet through torch.compile (compile time printed per job)")
    ap.add_argument("--per-arch", action="store_true",
                    help="faces/s of each arcface_torch arch (CPU; r100/vit_b also on CUDA)")
    ap.add_argument("--archs", default="all", help="--per-arch: CPU archs (comma list)")
    ap.add_argument("--gpu-archs", default="r100,vit_b", help="--per-arch: archs on CUDA")
    ap.add_argument("--cpu-threads", type=int, default=2, help="--per-arch: CPU threads")
    ap.add_argument("--cpu-n", type=int, default=16, help="--per-arch: faces per CPU figure")
    ap.add_argument("--decode-scaling", action="store_true",
                    help="crops/s of PNG decoding at 1..16 threads (OpenCV and Pillow)")
    ap.add_argument("--decode-n", type=int, default=0,
                    help="--decode-scaling: crops (0: 8 batches of 64 per thread)")
    ap.add_argument("--decode-repeat", type=int, default=3,
                    help="--decode-scaling: runs per figure (best is kept)")
    args = ap.parse_args()
    if args.decode_scaling:
        decode_scaling(args)
        return
    if args.per_arch:
        if torch.cuda.is_available():
            torch.backends.cudnn.benchmark = True
        per_arch(args)
        return
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'})"
          f", amp {args.amp}, torch threads {args.threads}, decode workers {args.workers}, "
          f"n {args.n}")
    pngs = {112: make_pngs(args.n, 112), 160: make_pngs(args.n, 160)}
    rows = [("decode PNG 112", "-", bs, timed(lambda bs=bs: [b for b in crop_loader(
        pngs[112], np.arange(args.n), batch_size=bs, size=112, device=device,
        num_workers=args.workers)], args.n), "-") for bs in batch_sizes]
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in model_cfgs(args, Path(tmp), n_fit=min(200, 2 * args.n)).items():
            fit = cfg.pop("_fit", None)
            emb = build_embedder(name, cfg, device=args.device, amp=args.amp, fit_path=fit,
                                 threads=args.threads)
            settings = cuda_fp32(emb.device, benchmark=cudnn_benchmark(  # as embed_shard
                active_amp(emb.device, emb.amp), False, bool(getattr(emb, "compiled", False))))
            settings.__enter__()
            size = 160 if emb.crop_column == "crop_facenet" else 112
            decoded = torch.from_numpy(np.stack(_decode(pngs[size])))
            if device.type == "cuda" and emb.device.type == "cuda":
                decoded = decoded.pin_memory()
            if cfg.get("backend") == "dlib_resnet":
                notes.append(dlib_threads_figure(emb, decoded))
            for bs in batch_sizes:
                def model_only(bs=bs, emb=emb, decoded=decoded):
                    for i in range(0, args.n, bs):
                        emb.embed(decoded[i:i + bs])

                def end_to_end(bs=bs, emb=emb, crops=pngs[size]):
                    embed_crops(emb, crops, np.arange(args.n), batch_size=bs,
                                num_workers=args.workers, threads=args.threads)

                rows.append((name, str(emb.device), bs, timed(model_only, args.n),
                             timed(end_to_end, args.n)))
                if cfg.get("backend") == "iresnet":
                    notes.append(model_goal(emb, args, bs, rows[-1][3]))
                notes.append(same_model_line(emb, bs, rows[-1][3], rows[-1][4], args.workers))
            settings.__exit__(None, None, None)
    print(f"\n{'what':<18}{'device':<8}{'batch':>6}{'model img/s':>14}{'end-to-end img/s':>18}")
    for what, dev, bs, a, b in rows:
        b_txt = f"{b:>18.1f}" if isinstance(b, float) else f"{b:>18}"
        print(f"{what:<18}{dev:<8}{bs:>6}{a:>14.1f}{b_txt}")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
