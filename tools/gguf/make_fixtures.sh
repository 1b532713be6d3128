#!/usr/bin/env bash
# Makes GGUF files with llama.cpp's own converter and quantizer, on the GPU
# machine (it has torch and transformers; this one has not):
#   - every tiny golden model of tests/fixtures (bf16; qwen3 and llama3 also
#     Q8_0, Q4_0 and Q4_K_M, which at hidden 32 fall back to 32-value blocks),
#     with the embedded model's tokenizer beside it, into tiny-gguf.tar.xz
#     (tests/fixtures/gguf/tiny-models.tar.xz keeps three of them, qwen3-bf16,
#     qwen3-Q4_K_M and llama3-bf16: the repository and a device call's carry
#     share a 64 MiB limit);
#   - the embedded model in bf16, Q8_0, Q6_K, Q5_K_M, Q4_K_M and Q4_0.
#
#   tools/gguf/make_fixtures.sh LLAMA_SRC_TAR_XZ OUT_DIR [KEEP_DIR]
#
# LLAMA_SRC_TAR_XZ is ../shared/peers/llama.cpp/llama-src.tar.xz (its
# converter takes LLAMA_CONVERT_FALLBACK_PRE=qwen2 for the embedded model's
# custom tokenizer). The embedded model's files go to KEEP_DIR (default
# OUT_DIR); tiny-gguf.tar.xz and the conversion logs to OUT_DIR.
set -euo pipefail
tar_xz=$1 out=$2 keep=${3:-$2}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
mkdir -p "$out" "$keep"
tar -xJf "$tar_xz" -C "$work"
src=$work/llama.cpp
export PYTHONPATH=$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import yaml, tqdm' 2>/dev/null || export PYTHONPATH=$PYTHONPATH:$src/pyvendor
export LLAMA_CONVERT_FALLBACK_PRE=qwen2

# The quantizer: libllama on the CPU only, and a 40-line driver.
(
  cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_COMMON=OFF > "$out/llama-build.log" 2>&1
  cmake --build "$work/build" -j "$(nproc)" --target llama >> "$out/llama-build.log" 2>&1
  g++ -O2 -x c "$repo/tools/gguf/quantize.c" -x none -I"$src/include" -I"$src/ggml/include" \
    $(find "$work/build" -name 'libllama.a') $(find "$work/build" -name 'libggml.a') \
    $(find "$work/build" -name 'libggml-cpu.a') $(find "$work/build" -name 'libggml-base.a') \
    -fopenmp -lpthread -lm -o "$work/gguf_quantize" >> "$out/llama-build.log" 2>&1
) &
build_pid=$!

convert() {  # hf_dir out.gguf
  python3 "$src/convert_hf_to_gguf.py" "$1" --outtype bf16 --outfile "$2" \
    > "$out/convert-$(basename "$2").log" 2>&1 ||
    { tail -20 "$out/convert-$(basename "$2").log"; return 1; }
}

tiny=$work/tiny
mkdir -p "$tiny/gguf"
for d in "$repo"/tests/fixtures/*/; do
  name=$(basename "$d")
  [ -f "$d/model.safetensors" ] || continue
  mkdir -p "$tiny/$name"
  cp "$d"/config.json "$d"/model.safetensors "$tiny/$name/"
  cp "$repo"/models/vegas-code-22m/tokenizer.json "$repo"/models/vegas-code-22m/tokenizer_config.json \
    "$tiny/$name/"
  convert "$tiny/$name" "$tiny/gguf/$name-bf16.gguf"
done
convert "$repo/models/vegas-code-22m" "$keep/vegas-code-22m-bf16.gguf"

wait "$build_pid" || { tail -30 "$out/llama-build.log"; exit 1; }
for name in qwen3 llama3; do
  for t in Q8_0 Q4_0 Q4_K_M; do
    "$work/gguf_quantize" "$tiny/gguf/$name-bf16.gguf" "$tiny/gguf/$name-$t.gguf" "$t" \
      > "$out/quantize-$name-$t.log" 2>&1
  done
done
for t in Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0; do
  "$work/gguf_quantize" "$keep/vegas-code-22m-bf16.gguf" "$keep/vegas-code-22m-$t.gguf" "$t" \
    > "$out/quantize-embedded-$t.log" 2>&1
done
tar -cJf "$out/tiny-gguf.tar.xz" -C "$tiny/gguf" .
ls -la "$tiny/gguf" "$keep"/*.gguf
rm -rf "$work"
