#!/usr/bin/env bash
# README command 2: install what is missing, build (CUDA sources too when nvcc
# is present: they are compiled for sm_90 even without a GPU), run every test
# that needs no GPU. GPU tests carry the ctest label `gpu` and are skipped here
# with a message; tools/device-check.sh runs them on a GPU machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VEGAS_BUILD_DIR:-$root/build}
start=$(date +%s)
phase() { echo "test: [$(($(date +%s) - start)) s] $*"; }
phase "install"
"$root/tools/install-deps.sh"
phase "build"
# Without a GPU the GPU tests could not run: only the library's CUDA code is
# compiled then (when nvcc is present), not the GPU test and benchmark binaries.
# The kernels are then compiled to PTX only (compile errors and warnings are
# checked; the machine code, nearly half of nvcc's time, is not made).
gpu_tests=ON cuda_arch=90
if ! nvidia-smi -L >/dev/null 2>&1; then gpu_tests=OFF cuda_arch=90-virtual; fi
# The CLI and server at -O1 here (VEGAS_SAMPLES_O1): tools/build.sh turns it off again.
"$root/tools/build.sh" -DVEGAS_BUILD_GPU_TESTS=$gpu_tests -DCMAKE_CUDA_ARCHITECTURES=$cuda_arch \
  -DVEGAS_SAMPLES_O1=ON
echo "test: the gpu-labelled tests are skipped here (no GPU: not built either); see tools/device-check.sh"
cd "$build"
phase "CPU tests"
ctest --output-on-failure -LE gpu -j "$(nproc)" --timeout 900
# The CPU suite again under ASan + UBSan (CUDA off, -O1; ~6 min on 2 cores), and
# the threading tests under TSan (~35 s).
phase "sanitizers"
"$root/tools/sanitize.sh" all
# Fuzzing (clang, ASan + UBSan): each libFuzzer target over its seed corpus
# and 10 s of mutations (~2 min with the build).
phase "fuzzing"
"$root/tools/fuzz.sh" "${VEGAS_CI_FUZZ_SECONDS:-10}"
phase "done"
