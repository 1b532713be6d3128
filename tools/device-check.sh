#!/usr/bin/env bash
# Runs on the GPU machine (repository root): the gpu-labelled test binaries and
# the CUDA decode benchmark from a carried folder made by tools/pack-cuda-carry.sh,
# logs under $OUT, and a short table last.
#   usage: tools/device-check.sh [carry_dir=.carry/cuda] [tests|bench|vegas|sanitize|server|all] [test filter regex]
#   sanitize: compute-sanitizer memcheck and racecheck over the correctness
#   tests of every kernel (timing tests left out: they only repeat launches).
#   vegas: `vegas bench --mode vegas` for every policy at 8K x 16 (sampling,
#   public prompts, gamma 6, ratio 0.07), vanilla measured in the same run.
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
FILTER=${3:-.}
if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  for t in "$DIR"/bin/test_cuda_*; do
    basename "$t" | grep -Eq "$FILTER" || continue
    name=$(basename "$t")
    start=$SECONDS
    "$t" > "$OUT/$name.log" 2>&1
    rc=$?
    secs=$((SECONDS - start))
    grep -E '^\[  (FAILED|PASSED) |Failure|Expected|Which is|rel_l2|error' "$OUT/$name.log" | head -40
    summary+=("$(printf '%-24s rc=%-3s %5ss  %s' "$name" "$rc" "$secs" "$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$OUT/$name.log" | tr '\n' ' ')")")
  done
fi
if [ "$WHAT" = sanitize ]; then
  sanitized=(
    "test_cuda_kernels all"
    "test_cuda_attention Attention.DecodeRows:Attention.VerifyRowsAreCausal:Attention.PrefillChunkOverPrefixMixedWithDecode:Attention.SparseDraftRows:Attention.CaptureLogitsAndLse"
    "test_cuda_kv_select CudaKvSelect.MatchesHostSelection"
    "test_cuda_quest CudaQuest.BoundsAndSelectionMatchHost"
    "test_cuda_prefill_attention PrefillAttention.MatchesReferenceHeadDim64:PrefillAttention.OtherPagesAndShapes"
    "test_cuda_verify_attention VerifyAttention.MatchesReferenceHeadDim64:VerifyAttention.SmallTiles"
    "test_cuda_sampling Sampling.GreedyMixedWithSampled:Sampling.EdgeRules:Sampling.MaskedAndBadRows:Sampling.PenaltiesMatchHost"
    "test_cuda_backend all"
  )
  for tool in memcheck racecheck; do
    for entry in "${sanitized[@]}"; do
      set -f && set -- $entry && set +f
      filter=$2 && [ "$filter" = all ] && filter='*'
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$DIR/bin/$1" --gtest_filter="$filter" \
        > "$OUT/sanitize-$tool-$1.log" 2>&1
      rc=$?
      summary+=("$(printf '%-9s %-28s rc=%-2s %s' "$tool" "$1" "$rc" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool-$1.log" | tail -1)")")
    done
  done
fi
if [ "$WHAT" = vegas ]; then
  prompts="$DIR/bench/prompts-public.jsonl"
  common=(bench --backend cuda --prompts "$prompts" --batch 16 --new-tokens 256 --mode vegas
    --gamma 6 --ratio 0.07 --seed 1)
  sampled=(--temperature 0.6 --top-k 20 --top-p 0.95)
  for ctx in ${VEGAS_CONTEXTS:-8192}; do
    for spec in "vegas 0.5" "vegas 0" "vegas 0.25" "streaming 0" "specextend 0" "vegas-all 0" "quest 0"; do
      set -- $spec
      "$DIR/bin/vegas" "${common[@]}" "${sampled[@]}" --context "$ctx" --policy "$1" --window-share "$2" \
        > "$OUT/vegas-$ctx-$1-$2.json" 2> "$OUT/vegas-$ctx-$1-$2.err"
      python3 - "$OUT/vegas-$ctx-$1-$2.json" "$ctx" "$1" "$2" <<'PY' || tail -3 "$OUT/vegas-$ctx-$1-$2.err"
import json, sys
j = json.load(open(sys.argv[1])); v = j["vegas"]; s = v.get("stats", v)
print(f"vegas ctx {sys.argv[2]:>5} {sys.argv[3]:<10} ws {sys.argv[4]:<4} tau {s.get('tau', 0):5.2f} "
      f"vanilla {j.get('decode_tokens_per_s', 0):8.0f} tok/s vegas {v['decode_tokens_per_s']:8.0f} tok/s "
      f"speedup {v.get('speedup', 0):4.2f}x steady {v.get('decode_tokens_per_s_steady', 0):8.0f} vs {j.get('decode_tokens_per_s_steady', 0):8.0f} = {v.get('speedup_steady', 0):4.2f}x "
      f"select {s.get('select_share', 0)*100:4.1f}% "
      f"draft {s.get('draft_share', 0)*100:4.1f}% verify {s.get('verify_share', 0)*100:4.1f}%")
PY
    done
    # Greedy: the tokens must equal vanilla's (lossless), device selection included.
    "$DIR/bin/vegas" "${common[@]}" --context "$ctx" --policy vegas --window-share 0.5 \
      --temperature 0 > "$OUT/vegas-$ctx-greedy.json" 2> "$OUT/vegas-$ctx-greedy.err"
    python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['vegas']; print('vegas ctx $ctx greedy: identical_to_vanilla', v.get('identical_to_vanilla'), 'tau %.2f' % v['tau'], 'speedup %.2fx' % v.get('speedup', 0))" "$OUT/vegas-$ctx-greedy.json" || tail -3 "$OUT/vegas-$ctx-greedy.err"
  done
  (cd "$OUT" && tar czf vegas-runs.tgz vegas-*.json vegas-*.err && rm -f vegas-*.json vegas-*.err)
fi
if [ "$WHAT" = server ]; then
  # 16 concurrent streaming clients against vegas-server on this GPU.
  for mode in vanilla vegas; do
    python3 tools/bench_server.py --server "$DIR/bin/vegas-server" --backend cuda --mode "$mode" \
      --clients 16 --requests 4 --max-tokens 64 2>&1 | tail -2
  done
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  "$DIR/bin/bench_cuda_decode" models/vegas-code-22m "$DIR/qwen3-8b.json" 2>&1 | tee "$OUT/bench.log"
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
[ -f "$OUT/bench.log" ] && sed -n '/^model /,$p' "$OUT/bench.log" && grep -E '^(device-to-device|prefill)' "$OUT/bench.log"
exit 0
