#!/usr/bin/env bash
# Runs on the GPU machine (repository root): the gpu-labelled test binaries and
# the CUDA decode benchmark from a carried folder made by tools/pack-cuda-carry.sh,
# logs under $OUT, and a short table last.
#   usage: tools/device-check.sh [carry_dir=.carry/cuda] [tests|bench|all]
set -u
DIR=${1:-.carry/cuda}
WHAT=${2:-all}
OUT=${OUT:-/tmp/vegas-device-check}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$DIR/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
if ! ldd "$DIR/bin/test_cuda_kernels" | grep -q 'libcublasLt.so.13 => /'; then
  lt=$(find / -name 'libcublasLt.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
  [ -n "$lt" ] && export LD_LIBRARY_PATH="$(dirname "$lt"):$LD_LIBRARY_PATH"
fi
export VEGAS_MODEL_DIR="$PWD/models/vegas-code-22m" VEGAS_SOURCE_DIR="$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader
summary=()
if [ "$WHAT" != bench ]; then
  for t in "$DIR"/bin/test_cuda_*; do
    name=$(basename "$t")
    start=$SECONDS
    "$t" > "$OUT/$name.log" 2>&1
    rc=$?
    secs=$((SECONDS - start))
    grep -E '^\[  (FAILED|PASSED) |Failure|Expected|Which is|rel_l2|error' "$OUT/$name.log" | head -40
    summary+=("$(printf '%-24s rc=%-3s %5ss  %s' "$name" "$rc" "$secs" "$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$OUT/$name.log" | tr '\n' ' ')")")
  done
fi
if [ "$WHAT" != tests ]; then
  "$DIR/bin/bench_cuda_decode" models/vegas-code-22m "$DIR/qwen3-8b.json" 2>&1 | tee "$OUT/bench.log"
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
[ -f "$OUT/bench.log" ] && sed -n '/^model /,$p' "$OUT/bench.log" && grep -E '^(device-to-device|prefill)' "$OUT/bench.log"
exit 0
