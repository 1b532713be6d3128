#!/usr/bin/env bash
# Installs what building and testing libvegas needs on Debian 12 (apt) and the
# Python test tooling (pip). Installs only what is missing; safe to re-run.
set -euo pipefail

apt_packages=(cmake ninja-build g++ pkg-config python3 python3-pip
  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev libmimalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  clang-14 libclang-rt-14-dev)  # clang: the libFuzzer targets (tools/fuzz.sh)
# Binding toolchains (ctest bindings_go, bindings_csharp, bindings_rust), each only when absent.
command -v go >/dev/null 2>&1 || apt_packages+=(golang-go)
command -v mcs >/dev/null 2>&1 || apt_packages+=(mono-mcs)
command -v mono >/dev/null 2>&1 || apt_packages+=(mono-runtime)
# ctest bindings_rust: Debian 12's cargo/rustc 1.63 (the crates use std only, offline).
command -v cargo >/dev/null 2>&1 || apt_packages+=(cargo rustc)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
# openai: the official client the vegas-server tests (tests/server) drive it with.
# matplotlib: tools/plot_bench.py, the plots of `vegas bench --report`.
# jinja2: tests/python/test_chat_format.py renders chat templates as transformers does.
if ! "$PYTHON" -c "import tokenizers, numpy, pytest, openai, matplotlib, jinja2" >/dev/null 2>&1; then
  echo "install-deps: pip install tokenizers numpy pytest openai matplotlib jinja2"
  "$PYTHON" -m pip install -q tokenizers numpy pytest openai matplotlib jinja2 2>/dev/null ||
    "$PYTHON" -m pip install -q --break-system-packages tokenizers numpy pytest openai matplotlib jinja2
fi
