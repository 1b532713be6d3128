#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan, CUDA off,
# only the runtime sources they need) and runs each for a bounded time over its
# committed seed corpus. New inputs go to a scratch corpus, never into the
# repository; a crash leaves its input in $build/artifacts/ and fails the run
# (keep it as a regression seed in tests/fuzz/corpus/<target>/ once fixed).
# Usage: tools/fuzz.sh [seconds per target, default 25]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VEGAS_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:-25}
cc=${VEGAS_FUZZ_CC:-clang-14}
cxx=${VEGAS_FUZZ_CXX:-clang++-14}
CC=$cc CXX=$cxx cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DVEGAS_CUDA=OFF -DVEGAS_FUZZ=ON -DVEGAS_BUILD_TESTS=OFF -DVEGAS_BUILD_SAMPLES=OFF \
  -DVEGAS_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_targets
mkdir -p "$build/artifacts"
# One target per core at a time (each libFuzzer run is one thread).
fuzz_one() {
  local target=$1 scratch
  scratch=$(mktemp -d)
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$build/bin/$target" "$scratch" "$root/tests/fuzz/corpus/$target" \
       -max_total_time="$seconds" -seed=1 -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
       -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
       >"$build/$target.log" 2>&1; then
    echo "fuzz: $target for ${seconds}s: $(grep -E "stat::number_of_executed_units" "$build/$target.log" | tail -1)"
    rm -rf "$scratch"
    return 0
  fi
  echo "fuzz: $target FAILED (input in $build/artifacts/)"
  tail -60 "$build/$target.log"
  rm -rf "$scratch"
  return 1
}
status=0
pids=()
for target in fuzz_safetensors fuzz_model_config fuzz_tokenizer_json fuzz_tokenize fuzz_detokenize \
  fuzz_gguf; do
  fuzz_one "$target" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$(nproc)" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
