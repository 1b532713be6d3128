#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here (no GPU needed) and packs
# them, stripped, with the Debian shared libraries they need and the Qwen3-8B
# config into .carry/cuda (ignored by git), for `run` with carry [".carry/cuda"].
#   usage: tools/pack-cuda-carry.sh [build_dir=build-carry]. The build holds
#   sm_90 machine code only (CMAKE_CUDA_ARCHITECTURES 90-real: the lent H100 and
#   H200 run it as is), without the PTX that the default build embeds for
#   newer GPUs and that made three of the four archives too large to carry
#   (10.2-10.6 MB with the repository's ~57 MB; a call holds 64 MiB in all).
#   Archives, each small enough to travel beside the tree: .carry/cuda-tests-{1,2,3}.tar.xz
#   (the gpu tests: the binaries with the whole library in two halves, the
#   kernel tests) and .carry/cuda-tools.tar.xz (CLI, server, benchmarks,
#   libvegas). Carry one and start the command with
#   `tar -xJf .carry/cuda-tests-1.tar.xz -C .carry`; all unpack into .carry/cuda.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build-carry}
[ -f "$B/CMakeCache.txt" ] ||
  cmake -S . -B "$B" -G Ninja -DVEGAS_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90-real > /dev/null
ninja -C "$B" -j2
rm -rf .carry/cuda && mkdir -p .carry/cuda/bin .carry/cuda/lib
for b in "$B"/bin/test_cuda_* "$B"/bin/bench_cuda_decode "$B"/bin/bench_cuda_phases "$B"/bin/vegas "$B"/bin/vegas-server \
  "$B"/bin/vegas_perplexity; do
  strip -o ".carry/cuda/bin/$(basename "$b")" "$b"
done
# The CLI finds libvegas through its $ORIGIN/../lib rpath.
strip -o .carry/cuda/lib/libvegas.so.0 "$B"/lib/libvegas.so.0
. tools/carry-libs.sh
copy_carry_libs .carry/cuda/lib .carry/cuda/bin/* .carry/cuda/lib/libvegas.so.0
cp ../shared/configs/qwen3-8b.json .carry/cuda/
cp tools/device-check.sh .carry/cuda/
du -sh .carry/cuda
# The public prompts for `device-check.sh ... vegas`. The tree plus the carry
# must stay under the device's 64 MiB: the binaries share most of their
# (large) fatbins, which an xz dictionary as large as the tar dedups.
mkdir -p .carry/cuda/bench && cp ../shared/bench/prompts-public.jsonl .carry/cuda/bench/
pack() {  # archive name, then paths under .carry
  local name=$1
  shift
  tar -cf - -C .carry "$@" | xz --lzma2=preset=6,dict=768MiB -T1 > ".carry/$name.tar.xz"
  ls -la ".carry/$name.tar.xz"
}
libs=$(cd .carry && ls cuda/lib/* | grep -v libvegas)
# The tests that link the whole library (a fatbin of ~33 MB each) in two
# halves, the kernel tests in a third archive.
whole=() kernel=()
for t in .carry/cuda/bin/test_cuda_*; do
  if [ "$(stat -c %s "$t")" -gt 30000000 ]; then whole+=("${t#.carry/}"); else kernel+=("${t#.carry/}"); fi
done
half=$(((${#whole[@]} + 1) / 2))
pack cuda-tests-1 "${whole[@]:0:$half}" $libs cuda/bench cuda/device-check.sh &
pack cuda-tests-2 "${whole[@]:$half}" $libs cuda/bench cuda/device-check.sh &
wait
pack cuda-tests-3 "${kernel[@]}" $libs cuda/bench cuda/device-check.sh &
pack cuda-tools cuda/bin/vegas cuda/bin/vegas-server cuda/bin/vegas_perplexity \
  cuda/bin/bench_cuda_decode cuda/bin/bench_cuda_phases cuda/lib cuda/bench cuda/qwen3-8b.json \
  cuda/device-check.sh &
wait
