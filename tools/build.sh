#!/usr/bin/env bash
# Configures and builds libvegas into build/ (or $VEGAS_BUILD_DIR). Extra
# arguments go to cmake (e.g. -DVEGAS_CUDA=OFF).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VEGAS_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGAS_WERROR=ON \
  -DVEGAS_SAMPLES_O1=OFF "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
