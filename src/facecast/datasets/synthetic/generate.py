"""Generation of the synthetic dataset: render every image of every identity (in parallel
processes from :func:`facecast.parallel.process_pool`, never forked), write them as JPEG,
then write the truth table. :func:`generate_dataset` is the one entry point (the
``synthetic_dataset`` rule calls it).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image
from tqdm import tqdm

from facecast.datasets.synthetic.render import render_image
from facecast.datasets.synthetic.sampling import (
    IMAGE_STREAM,
    TRAIT_STREAM,
    sample_covariates,
    sample_identity,
    stream_rng,
)
from facecast.datasets.synthetic.truth import (
    identity_labels,
    identity_name,
    image_path,
    image_row,
    write_truth,
)
from facecast.io.atomic import write_bytes
from facecast.parallel import process_pool

__all__ = ["generate_dataset"]


def _encode_jpeg(img: np.ndarray, quality: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def _identity_rows(job: tuple[int, int, int, int, str]) -> list[dict[str, Any]]:
    """Render and write every image of one identity; return its table rows."""
    seed, index, n_images, size, out_dir = job
    traits = sample_identity(stream_rng(seed, TRAIT_STREAM, index))
    name = identity_name(index)
    (Path(out_dir) / "images" / name).mkdir(parents=True, exist_ok=True)
    labels = identity_labels(traits)
    rows = []
    for k in range(n_images):
        rng = stream_rng(seed, IMAGE_STREAM, index, k)
        cov = sample_covariates(rng, traits)
        img = render_image(traits, cov, size, rng)
        data = _encode_jpeg(img, cov.jpeg_quality)
        write_bytes(Path(out_dir) / image_path(name, k), data)
        rows.append(image_row(name, k, labels, cov))
    return rows


def generate_dataset(
    out_dir: Path,
    *,
    seed: int,
    n_jobs: int = 1,
    provenance: dict | None = None,
    n_identities: int = 240,
    images_per_identity: int = 8,
    image_size: int = 224,
    label_noise: dict | None = None,
) -> pd.DataFrame:
    """Render the synthetic dataset into ``out_dir``; return (and write) its truth table.

    Images go to ``out_dir/images/<identity>/<k>.jpg``; the table, written last with
    :func:`facecast.io.parquet_io.write_parquet`, to ``out_dir/truth.parquet``. Columns:
    ``path`` (relative to ``out_dir``), ``identity``, ``split`` (``train``/``test``),
    ``exclude`` (bool, True for train identities) and float ``label_*`` ground truth for
    every trait and covariate (see :mod:`facecast.datasets.synthetic`). Rows are ordered
    by identity, then image index. Output depends only on ``seed`` and the sizes, not on
    ``n_jobs``.

    ``label_noise`` (a :data:`facecast.datasets.label_noise.DEMO_LABEL_NOISE`-shaped spec) adds
    observed annotation columns ``label_noisy_<attr>`` with planted annotation noise (issue
    14); images and the clean ``label_*`` columns are unchanged. None = no such columns.
    """
    if n_identities < 1 or images_per_identity < 1:
        raise ValueError("n_identities and images_per_identity must be >= 1, got "
                         f"{n_identities} and {images_per_identity}")
    if not 32 <= image_size <= 4096:
        raise ValueError(f"image_size must be in [32, 4096], got {image_size}")
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    jobs = [(int(seed), i, int(images_per_identity), int(image_size), str(out_dir))
            for i in range(n_identities)]
    n_jobs = max(1, min(int(n_jobs), n_identities))
    rows: list[dict[str, Any]] = []
    progress = tqdm(total=n_identities, desc="synthetic identities", unit="id",
                    mininterval=2.0)
    if n_jobs == 1:
        for job in jobs:
            rows.extend(_identity_rows(job))
            progress.update()
    else:
        with process_pool(n_jobs, preload=[__name__]) as pool:
            for part in pool.map(_identity_rows, jobs, chunksize=4):
                rows.extend(part)
                progress.update()
    progress.close()
    return write_truth(rows, out_dir, seed=seed, n_identities=n_identities,
                       images_per_identity=images_per_identity, image_size=image_size,
                       label_noise=label_noise, provenance=provenance)
