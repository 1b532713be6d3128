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
status=0
for target in fuzz_safetensors fuzz_model_config fuzz_tokenizer_json fuzz_tokenize fuzz_detokenize; do
  scratch=$(mktemp -d)
  echo "fuzz: $target for ${seconds}s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       "$build/bin/$target" "$scratch" "$root/tests/fuzz/corpus/$target" \
         -max_total_time="$seconds" -seed=1 -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
         -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
         >"$build/$target.log" 2>&1; then
    echo "fuzz: $target FAILED (input in $build/artifacts/)"
    tail -60 "$build/$target.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build/$target.log" | tail -2
  fi
  rm -rf "$scratch"
done
exit $status
