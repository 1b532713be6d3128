#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here (no GPU needed) and packs
# them, stripped, with the Debian shared libraries they need and the Qwen3-8B
# config into .carry/cuda (ignored by git), for `run` with carry [".carry/cuda"].
#   usage: tools/pack-cuda-carry.sh [build_dir=build-cuda]; carry [".carry/cuda.tar.xz"] and
#   start the command with `tar -xJf .carry/cuda.tar.xz -C .carry`.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build-cuda}
cmake -S . -B "$B" -G Ninja -DVEGAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
ninja -C "$B" -j2
rm -rf .carry/cuda && mkdir -p .carry/cuda/bin .carry/cuda/lib
for b in "$B"/bin/test_cuda_* "$B"/bin/bench_cuda_decode "$B"/bin/bench_cuda_phases "$B"/bin/vegas "$B"/bin/vegas-server \
  "$B"/bin/vegas_perplexity; do
  strip -o ".carry/cuda/bin/$(basename "$b")" "$b"
done
# The CLI finds libvegas through its $ORIGIN/../lib rpath.
strip -o .carry/cuda/lib/libvegas.so.0 "$B"/lib/libvegas.so.0
# Libraries the device image lacks (it has CUDA, not our Debian packages).
for lib in $(ldd .carry/cuda/bin/* .carry/cuda/lib/libvegas.so.0 | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libmimalloc*|libgomp*|libpcre2*|libutf8proc*|libcpp-httplib*|libbrotli*) cp -L "$lib" .carry/cuda/lib/ ;;
  esac
done
cp ../shared/configs/qwen3-8b.json .carry/cuda/
cp tools/device-check.sh .carry/cuda/
du -sh .carry/cuda
# The public prompts for `device-check.sh ... vegas`, and one archive to carry:
# the tree plus the carry must stay under the device's 64 MiB, and the test
# binaries share most of their (large) fatbins, which xz -9e's window dedups.
mkdir -p .carry/cuda/bench && cp ../shared/bench/prompts-public.jsonl .carry/cuda/bench/
tar -cf - -C .carry cuda | xz -9e -T2 > .carry/cuda.tar.xz
ls -la .carry/cuda.tar.xz
