#!/usr/bin/env bash
# The CPU test suite under sanitizers, CUDA off, -O1 (cheap enough for CI):
#   asan: every unit and ABI test against the library built with ASan + UBSan
#         (LeakSanitizer included; the test programs themselves uninstrumented),
#         except the few 2K-token model runs listed in $heavy, which take 3-10
#         minutes each under ASan and run no code the smaller tests do not;
#   tsan: the threading tests (test_abi_threads, test_worker_pool) under TSan.
# Python tests are left out: they load libvegas.so into an uninstrumented
# interpreter; so are the vegas-server tests (server_tests: they need the CLI and
# the server, not built here). Only the test binaries are built (no CLI, no benchmarks).
# Usage: tools/sanitize.sh [asan|tsan|all] (default all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
which=${1:-all}
heavy='Greedy2kMatchesF32Reference|GreedyEqualsVanillaOnPublic2kPrompts|SpeculativeStats\.(FullPolicyAcceptsEveryDraftAndCountsExactly|SparsePolicyCountersAreConsistent|AutoModeMixesRoundsAndVanillaStepsLosslessly)'
# VEGAS_MODE_AUTO's run on a 2K prompt (4.2 minutes under ASan) stays out too:
# SpeculativeStats.AutoModeOnAShortPrompt runs the same path. The auto-tuning
# runs on a 2K prompt (7.5 and 3.4 minutes under ASan) and the quest session
# run: same code as the smaller auto / quest tests that stay.
heavy+='|AutoTuning\.WrongProfileIsCorrectedAtRunTime|AutoTuningAbi\.GreedyLosslessWithEveryKnobAutoAndTheSwitchLog|SessionQuest\.GreedyEqualsVanilla'
# The prefix cache's session runs on 4K and 1K prompts (the latter 8.5 minutes
# under ASan, the former past the 15-minute timeout): its 600-token test and
# KvPool's 20,000 random page operations cover the same code.
heavy+='|PrefixCache\.(SecondRequestPrefillsOnlyTheDifference|EvictionNeverTouchesASharedPrefixInUse)'
# The chi-square tests of speculative sampling (2.5 minutes of arithmetic under
# ASan): AcceptSampledLossless runs the same acceptance code on fewer draws.
heavy+='|SpeculativeSampling\.'
# The same for token trees (~26 s under ASan): AcceptTreeSampled.* runs the
# tree acceptance code on a few draws.
heavy+='|AcceptTreeSampledLossless\.'
# The fp8 cache's lossless check on the 2K prompts (past the 15-minute timeout
# under ASan on the CI machine): Fp8KvCacheRoundsTheStoredValues and test_kv_fp8
# run the fp8 rounding, and the lossless shards the same round code.
heavy+='|Fp8LosslessShard\.'
# Likewise the token trees' lossless shards: TreeAttention, TreeSampling and
# TreeSession run the same tree code on short prompts.
heavy+='|TreeLosslessShard\.'
# The draft model's 2K-prompt run: the other DraftModel tests run its code on a
# short prompt.
heavy+='|DraftModel\.LayerSkipDraftEqualsVanillaOnAPublicPrompt'
configure() {  # build dir, sanitizers, then more cmake arguments
  local dir=$1 san=$2
  shift 2
  cmake -S "$root" -B "$dir" -G Ninja -DVEGAS_CUDA=OFF -DVEGAS_SANITIZE="$san" "$@" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" >/dev/null
}
if [ "$which" = asan ] || [ "$which" = all ]; then
  build=${VEGAS_ASAN_BUILD_DIR:-$root/build-asan}
  # The library instrumented; the test programs only link the runtime.
  configure "$build" "address;undefined" -DVEGAS_SANITIZE_LIBRARY_ONLY=ON
  mapfile -t targets < <(ninja -C "$build" -t targets all |
                         sed -nE 's/^((test_|abi_)[a-z0-9_]+): phony$/\1/p')
  cmake --build "$build" -j "$(nproc)" --target vegas "${targets[@]}"
  # halt_on_error: a UBSan finding fails its test instead of scrolling by.
  ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$build" --output-on-failure -LE gpu -E "^(python|server)_tests\$|$heavy" \
      -j "$(nproc)" --timeout 900
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  build=${VEGAS_TSAN_BUILD_DIR:-$root/build-tsan}
  configure "$build" "thread"
  cmake --build "$build" -j "$(nproc)" --target test_abi_threads test_worker_pool
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$build/bin/test_abi_threads"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$build/bin/test_worker_pool"
fi
