#!/usr/bin/env bash
# Runs on the GPU machine (repository root): the gpu-labelled test binaries and
# the CUDA decode benchmark from a carried folder made by tools/pack-cuda-carry.sh,
# logs under $OUT, and a short table last.
#   usage: tools/device-check.sh [carry_dir=.carry/cuda] [tests|bench|phases|vegas|drafters|auto|graphs|sanitize|server|tune|profile|profile-phases|timeline|quant|all] [test filter regex]
#   graphs: verification passes replayed as graphs (the opt-in switches) against
#   eager ones, in `vegas bench` (GRAPH_SHAPES).
#   drafters: chain, prompt lookup and a draft model trained there
#   (tools/train_draft_model.py) at 8K and 16K x 16, sampled and greedy.
#   phases: bench_cuda_phases (verify, selection and draft against the vanilla step;
#   VEGAS_PHASE_SHAPES picks the shapes, e.g. "8192x16,8192x16f": f for the fp8 KV cache).
#   profile-phases: ncu kernel durations of a verify pass and a draft step.
#   tune: vegas tune (8K, 16K x 16), auto mode against its profile (batch 16
#   and per prompt), and `vegas bench --report` sweeps, packed in tune-runs.tgz.
#   sanitize: compute-sanitizer memcheck and racecheck over the correctness
#   tests of every kernel (timing tests left out: they only repeat launches).
#   timeline: stamps inside the launch chain of a -DVEGAS_TIMELINE build
#   (kernels/timeline.cuh) at TIMELINE_SHAPES (default 2048x1,8192x16d).
#   profile: ncu kernel durations of decode steps (PROFILE_SHAPES, default
#   2048x1,8192x16,8192x16d), summed per kernel over one step; no counters.
#   auto: `vegas bench --mode auto` against vanilla and --mode vegas with the
#   policies vegas and lookup (AUTO_SHAPES; AUTO_POLICY, default vegas+lookup;
#   AUTO_KNOBS=profile: auto with the tuning profile's policy, gamma and ratio).
#   vegas: `vegas bench --mode vegas` for every policy at 8K x 16 (sampling,
#   public prompts, gamma 6, ratio 0.07), vanilla measured in the same run;
#   VEGAS_CONTEXTS picks the contexts, VEGAS_BENCH_ARGS adds arguments to
#   every run (e.g. "--kv-type fp8").
#   quant: GGUF files made by llama.cpp (carry its snapshot as LLAMA_SRC),
#   their perplexity, greedy Vegas with quantized matrices, and Qwen3-8B
#   shapes with bf16 / Q8_0 / Q4_0 / F8 matrices.
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
# The public prompts travel in the carry (bench/prompts-public.jsonl), for the tests that read them.
export VEGAS_SHARED_DIR="${VEGAS_SHARED_DIR:-$PWD/$DIR}"
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
  # Variants with a switch (kernels/cuda_utils.cuh): the tests that exercise
  # them, again with the switch the other way (candidates on by default,
  # cluster merge opt-in), and a chain that loses its candidates (the round
  # drops its drafts: greedy Vegas must still equal vanilla).
  for entry in "VEGAS_CUDA_CANDIDATES=0 test_cuda_vegas" "VEGAS_CUDA_CANDIDATES=0 test_cuda_backend" \
    "VEGAS_CUDA_CLUSTER_MERGE=1 test_cuda_attention" "VEGAS_CUDA_CLUSTER_MERGE=1 test_cuda_backend" \
    "VEGAS_CUDA_VERIFY_WARPS=0 test_cuda_backend" "VEGAS_CUDA_VERIFY_WARPS=0 test_cuda_vegas" \
    "VEGAS_CUDA_FAULT_CHAIN_OVERFLOW=1 test_cuda_vegas" "VEGAS_CUDA_DEVICE_ACCEPT=0 test_cuda_vegas" \
    "VEGAS_CUDA_QUANT_MMA=1 test_cuda_quant_gemv" "VEGAS_CUDA_VERIFY_GRAPHS=1 test_cuda_backend" \
    "VEGAS_CUDA_VERIFY_GRAPHS=1 test_cuda_vegas" \
    "VEGAS_CUDA_VERIFY_GRAPHS=1,VEGAS_CUDA_CAPTURE_GRAPHS=1 test_cuda_backend" \
    "VEGAS_CUDA_VERIFY_GRAPHS=1,VEGAS_CUDA_CAPTURE_GRAPHS=1 test_cuda_vegas"; do
    set -- $entry  # switches (NAME=value, comma-separated), binary
    echo "$2" | grep -Eq "$FILTER" || continue
    log="$OUT/$2-$(echo "$1" | sed 's/=[^,]*//g; s/,/+/g').log"
    env $(echo "$1" | tr ',' ' ') "$DIR/bin/$2" > "$log" 2>&1
    rc=$?
    summary+=("$(printf '%-24s rc=%-3s %s' "$2 $1" "$rc" "$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$log" | tr '\n' ' ')")")
  done
fi
if [ "$WHAT" = sanitize ]; then
  sanitized=(
    "test_cuda_kernels all"
    "test_cuda_attention Attention.DecodeRows:Attention.DecodeKernelGroupsAndSplits:Attention.VerifyRowsAreCausal:Attention.PrefillChunkOverPrefixMixedWithDecode:Attention.SparseDraftRows:Attention.CaptureLogitsAndLse"
    "test_cuda_small_gemm all"
    "test_cuda_logit_candidates LogitCandidatesKernel.MatchesHostExactly"
    "test_cuda_qkv_rope all"
    "test_cuda_kv_select CudaKvSelect.MatchesHostSelection"
    "test_cuda_quest CudaQuest.BoundsAndSelectionMatchHost"
    "test_cuda_prefill_attention PrefillAttention.MatchesReferenceHeadDim64:PrefillAttention.OtherPagesAndShapes"
    "test_cuda_verify_attention VerifyAttention.MatchesReferenceHeadDim64:VerifyAttention.SmallTiles:VerifyAttention.WarpsKernelMatchesReference"
    "test_cuda_sampling Sampling.GreedyMixedWithSampled:Sampling.EdgeRules:Sampling.MaskedAndBadRows:Sampling.PenaltiesMatchHost:Sampling.FromCandidates*"
    "test_cuda_backend all"
    "test_cuda_accept DeviceAccept.KernelMatchesHostRule:DeviceAccept.HandsBackWhatItCannotAccept"
    "test_cuda_quant_gemv CudaQuantGemv.*:CudaQuantDequantize.*"
  )
  for tool in memcheck racecheck; do
    for entry in "${sanitized[@]}"; do
      set -f && set -- $entry && set +f
      filter=$2 && [ "$filter" = all ] && filter='*'
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$DIR/bin/$1" --gtest_filter="$filter" \
        > "$OUT/sanitize-$tool-$1.log" 2>&1
      rc=$?
      # racecheck also reports inside cuBLASLt's GEMMs (nvjet_*), which order
      # shared memory with TMA and mbarriers it does not follow; ours are the
      # reports in any other kernel. (Excluding nvjet from the run instead made
      # the sanitizer itself fail on the H100.)
      ours=""
      [ "$tool" = racecheck ] &&
        ours="; outside cuBLASLt: $(grep -E 'Race reported' "$OUT/sanitize-$tool-$1.log" | grep -vc nvjet_)"
      summary+=("$(printf '%-9s %-28s rc=%-2s %s%s' "$tool" "$1" "$rc" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool-$1.log" | tail -1)" "$ours")")
    done
  done
fi
if [ "$WHAT" = auto ]; then
  # VEGAS_MODE_AUTO against vanilla and the fixed drafters (sampling, public
  # prompts, gamma 6, ratio 0.07; policies vegas and lookup) at AUTO_SHAPES.
  # The auto run takes AUTO_POLICY (default vegas+lookup, auto mode's own
  # default) or AUTO_KNOBS ("profile": policy auto, gamma 0, ratio 0, as the
  # tuning profile and the refinement choose them).
  prompts="$DIR/bench/prompts-public.jsonl"
  common=(bench --backend cuda --prompts "$prompts" --new-tokens 256 --seed 1
    --temperature 0.6 --top-k 20 --top-p 0.95)
  fixed=(--policy vegas --gamma 6 --ratio 0.07)
  knobs=(--policy "${AUTO_POLICY:-vegas+lookup}" --gamma 6 --ratio 0.07)
  [ "${AUTO_KNOBS:-}" = profile ] && knobs=(--policy auto --gamma 0 --ratio 0)
  for shape in ${AUTO_SHAPES:-2048x64 8192x16 8192x64 16384x16}; do
    ctx=${shape%x*} batch=${shape#*x}
    "$DIR/bin/vegas" "${common[@]}" "${fixed[@]}" --context "$ctx" --batch "$batch" --mode vegas \
      > "$OUT/auto-$shape-vegas.json" 2> "$OUT/auto-$shape-vegas.err"
    "$DIR/bin/vegas" "${common[@]}" --policy lookup --gamma 6 --context "$ctx" --batch "$batch" \
      --mode vegas --no-baseline > "$OUT/auto-$shape-lookup.json" 2> "$OUT/auto-$shape-lookup.err"
    # Auto after vanilla in one process, as --mode vegas is measured.
    "$DIR/bin/vegas" "${common[@]}" "${knobs[@]}" --context "$ctx" --batch "$batch" --mode auto \
      > "$OUT/auto-$shape-auto.json" 2> "$OUT/auto-$shape-auto.err"
    summary+=("$(python3 - "$OUT/auto-$shape-vegas.json" "$OUT/auto-$shape-auto.json" "$shape" \
      "$OUT/auto-$shape-lookup.json" <<'PY' || tail -2 "$OUT/auto-$shape-auto.err"
import json, sys
f = json.load(open(sys.argv[1])); j = json.load(open(sys.argv[2])); a = j["vegas"]
van, veg, aut = f["decode_tokens_per_s_mean"], f["vegas"]["decode_tokens_per_s"], a["decode_tokens_per_s"]
lk = json.load(open(sys.argv[4]))["vegas"]["decode_tokens_per_s"]
van2 = j["decode_tokens_per_s_mean"]  # vanilla of the auto run's process
print(f"auto {sys.argv[3]:>8}: vanilla {van:7.0f} / {van2:7.0f} vegas {veg:7.0f} lookup {lk:7.0f} "
      f"auto {aut:7.0f} tok/s = {aut / van2:4.2f}x its vanilla, "
      f"{aut / max(van, veg, lk):4.2f}x the best fixed; "
      f"round tokens {a['round_token_share'] * 100:3.0f}%")
PY
)")
  done
fi
if [ "$WHAT" = graphs ]; then
  # Verification passes replayed as graphs (VEGAS_CUDA_VERIFY_GRAPHS=1, and
  # with VEGAS_CUDA_CAPTURE_GRAPHS=1 those that capture scores) against eager
  # ones: fixed lookup at GRAPH_SHAPES (default 8K x 2 and 8K x 16) and the
  # default auto vegas+lookup and fixed vegas at 8K x 16, sampled, four seeds
  # each (auto mode's choices move a seed's figure by +-20%).
  prompts="$DIR/bench/prompts-public.jsonl"
  common=(bench --backend cuda --prompts "$prompts" --new-tokens 256 --seed 1 --seeds 4
    --gamma 6 --ratio 0.07 --window-share 0.5 --temperature 0.6 --top-k 20 --top-p 0.95)
  for variant in eager verify capture; do
    switches=()
    [ "$variant" != eager ] && switches+=(VEGAS_CUDA_VERIFY_GRAPHS=1)
    [ "$variant" = capture ] && switches+=(VEGAS_CUDA_CAPTURE_GRAPHS=1)
    for run in ${GRAPH_SHAPES:-8192x2:lookup:vegas 8192x16:lookup:vegas 8192x16:vegas+lookup:auto \
      8192x16:vegas:vegas}; do
      IFS=: read -r shape policy mode <<< "$run"
      ctx=${shape%x*} batch=${shape#*x}
      tag="graphs-$variant-$shape-$policy-$mode"
      env "${switches[@]}" "$DIR/bin/vegas" "${common[@]}" --context "$ctx" --batch "$batch" \
        --policy "$policy" --mode "$mode" > "$OUT/$tag.json" 2> "$OUT/$tag.err"
      summary+=("$(python3 - "$OUT/$tag.json" "$variant" "$shape" "$policy" "$mode" <<'PY' || tail -2 "$OUT/$tag.err"
import json, sys
v = json.load(open(sys.argv[1]))["vegas"]; s = v.get("over_seeds", {})
print(f"graphs {sys.argv[2]:<7} {sys.argv[3]:>8} {sys.argv[4]:<12} {sys.argv[5]:<5} "
      f"speedup mean {s.get('speedup_mean', v.get('speedup', 0)):4.2f}x "
      f"({' '.join('%.2f' % x for x in s.get('speedup', []))}) "
      f"full batch {v.get('speedup_full_batch', 0):4.2f}x tau {v.get('tau', 0):4.2f}")
PY
)")
    done
  done
fi
if [ "$WHAT" = drafters ]; then
  # Issue 24's table: the chain, prompt lookup and a trained draft model
  # (tools/train_draft_model.py, DRAFT_SECONDS of distillation from the
  # embedded model; DRAFT_DIR to reuse one), vanilla in the same runs, at
  # 8K and 16K x 16, sampled and greedy; token trees of 2 branches over 1 and
  # 2 levels and of 3 over 1 (DRAFT_SECONDS=0 skips the draft model's rows).
  draft=${DRAFT_DIR:-$OUT/draft-model}
  if [ "${DRAFT_SECONDS:-240}" != 0 ] && [ ! -f "$draft/model.safetensors" ]; then
    PYTHONUNBUFFERED=1 python3 tools/train_draft_model.py "$VEGAS_MODEL_DIR" "$draft" \
      "${DRAFT_SECONDS:-240}" "${DRAFT_LAYERS:-2}" > "$OUT/draft-train.log" 2>&1 ||
      tail -5 "$OUT/draft-train.log"
    tail -2 "$OUT/draft-train.log"
  fi
  common=(bench --backend cuda --prompts "$DIR/bench/prompts-public.jsonl" --batch 16
    --new-tokens 256 --gamma 6 --ratio 0.07 --seed 1 --mode vegas)
  for ctx in ${VEGAS_CONTEXTS:-8192 16384}; do
    for temp in 0.6 0; do
      specs=("chain --policy vegas" "tree2x1 --policy vegas --tree-branches 2 --tree-depth 1"
        "tree2x2 --policy vegas --tree-branches 2 --tree-depth 2"
        "tree3x1 --policy vegas --tree-branches 3 --tree-depth 1" "lookup --policy lookup")
      [ -f "$draft/model.safetensors" ] && specs+=("draft --draft-model $draft"
        "draft-w1024 --draft-model $draft --draft-window 1024"
        "vegas+model --policy vegas+model --draft-model $draft")
      for spec in "${specs[@]}"; do
        set -- $spec
        tag=$1
        shift
        timeout 120 "$DIR/bin/vegas" "${common[@]}" --context "$ctx" --temperature "$temp" \
          --top-k 20 --top-p 0.95 "$@" > "$OUT/drafters-$ctx-$temp-$tag.json" \
          2> "$OUT/drafters-$ctx-$temp-$tag.err"
        python3 - "$OUT/drafters-$ctx-$temp-$tag.json" "$ctx" "$temp" "$tag" <<'PY' || tail -3 "$OUT/drafters-$ctx-$temp-$tag.err"
import json, sys
j = json.load(open(sys.argv[1])); v = j["vegas"]
van, veg = j["decode_tokens_per_s"], v["decode_tokens_per_s"]
print(f"drafters ctx {sys.argv[2]:>5} T {sys.argv[3]:<3} {sys.argv[4]:<12} tau {v['tau']:5.2f} "
      f"vanilla {van:7.0f} tok/s {veg:7.0f} = {veg / van:4.2f}x (steady {v.get('speedup_steady', 0):4.2f}x, "
      f"full batch {v.get('speedup_full_batch', 0):4.2f}x) "
      f"identical {v.get('identical_to_vanilla')} first difference {v.get('first_difference')}")
PY
      done
    done
  done
fi
if [ "$WHAT" = vegas ]; then
  prompts="$DIR/bench/prompts-public.jsonl"
  common=(bench --backend cuda --prompts "$prompts" --batch 16 --new-tokens 256 --mode vegas
    --gamma 6 --ratio 0.07 --seed 1 ${VEGAS_BENCH_ARGS:-})
  sampled=(--temperature 0.6 --top-k 20 --top-p 0.95)
  for ctx in ${VEGAS_CONTEXTS:-8192}; do
    # The last entry repeats the default with whole logit rows downloaded
    # (VEGAS_CUDA_CANDIDATES=0, the host picks the candidates).
    for spec in "vegas 0.5" "vegas 0" "vegas 0.25" "streaming 0" "specextend 0" "vegas-all 0" "quest 0" \
      "lookup 0.5" "vegas+lookup 0.5" "vegas 0.5 VEGAS_CUDA_CANDIDATES=0"; do
      set -- $spec
      tag="$1-$2${3:+-candidates}"
      env ${3:-} "$DIR/bin/vegas" "${common[@]}" "${sampled[@]}" --context "$ctx" --policy "$1" --window-share "$2" \
        > "$OUT/vegas-$ctx-$tag.json" 2> "$OUT/vegas-$ctx-$tag.err"
      python3 - "$OUT/vegas-$ctx-$tag.json" "$ctx" "$1" "$2${3:+ (host candidates)}" <<'PY' || tail -3 "$OUT/vegas-$ctx-$tag.err"
import json, sys
j = json.load(open(sys.argv[1])); v = j["vegas"]; s = v.get("stats", v)
print(f"vegas ctx {sys.argv[2]:>5} {sys.argv[3]:<10} ws {sys.argv[4]:<4} tau {s.get('tau', 0):5.2f} "
      f"vanilla {j.get('decode_tokens_per_s', 0):8.0f} tok/s vegas {v['decode_tokens_per_s']:8.0f} tok/s "
      f"speedup {v.get('speedup', 0):4.2f}x steady {v.get('decode_tokens_per_s_steady', 0):8.0f} vs {j.get('decode_tokens_per_s_steady', 0):8.0f} = {v.get('speedup_steady', 0):4.2f}x "
      f"full batch {v.get('speedup_full_batch', 0):4.2f}x "
      f"select {s.get('select_share', 0)*100:4.1f}% "
      f"draft {s.get('draft_share', 0)*100:4.1f}% verify {s.get('verify_share', 0)*100:4.1f}%")
PY
    done
    # Greedy: the tokens must equal vanilla's (lossless), device selection included.
    for pol in vegas lookup vegas+lookup; do
      "$DIR/bin/vegas" "${common[@]}" --context "$ctx" --policy $pol --window-share 0.5 \
        --temperature 0 > "$OUT/vegas-$ctx-greedy-$pol.json" 2> "$OUT/vegas-$ctx-greedy-$pol.err"
      python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['vegas']; print('$pol ctx $ctx greedy: identical_to_vanilla', v.get('identical_to_vanilla'), 'first difference', v.get('first_difference'), 'tau %.2f' % v['tau'], 'speedup %.2fx' % v.get('speedup', 0))" "$OUT/vegas-$ctx-greedy-$pol.json" || tail -3 "$OUT/vegas-$ctx-greedy-$pol.err"
    done
  done
  (cd "$OUT" && tar czf vegas-runs.tgz vegas-*.json vegas-*.err && rm -f vegas-*.json vegas-*.err)
fi
if [ "$WHAT" = tune ]; then
  # P1-9 on this GPU: a profile for 8K and 16K x 16 (sampling as the vegas
  # table), auto mode against it at batch 16 and per prompt at batch 1, and the
  # report's sweeps (report.json; plot it with tools/plot_bench.py). The public
  # "16K" prompts are ~14.5K tokens, so the 8-16K bucket is cut at 12K to give
  # them their own setting.
  prompts="$DIR/bench/prompts-public.jsonl"
  sampled=(--temperature 0.6 --top-k 20 --top-p 0.95 --seed 1)
  # TUNE_PROFILE=FILE: skip the tuning and evaluate auto mode against FILE.
  if [ -n "${TUNE_PROFILE:-}" ]; then cp "$TUNE_PROFILE" "$OUT/vegas-profile.json"; else
  "$DIR/bin/vegas" tune --backend cuda --prompts "$prompts" --contexts 8192,16384 --batches 16 \
    --candidates vegas:0.5,vegas:0.25,streaming,lookup,vegas+lookup:0.5 --ratios 0.04,0.07,0.1,0.15 --gammas 3,4,6,8 \
    --large-gamma 8 --new-tokens "${TUNE_TOKENS:-128}" "${sampled[@]}" --context-edges 4096,8192,12288 \
    --out "$OUT/vegas-profile.json" --sweep-json "$OUT/tune-sweep.json" 2> "$OUT/tune.err" | tail -2
  tail -4 "$OUT/tune.err"; fi
  [ -f "$OUT/vegas-profile.json" ] || { echo "vegas tune failed"; exit 1; }
  cp "$OUT/vegas-profile.json" "$VEGAS_MODEL_DIR/vegas-profile.json"  # where auto mode looks
  # The profile's setting of a bucket, as bench options.
  fixed_of() {
    python3 -c "
import json; p = json.load(open('$OUT/vegas-profile.json')); n = $1
b = [b for b in p['buckets'] if b['context_min'] <= n < (b['context_max'] if b['context_max'] >= 0 else 1 << 30)] or p['buckets']
b = b[0]; print('--policy %s --window-share %s --gamma %d --ratio %s' % (b['policy'], b['window_share'], b['gamma'], b['ratio']))"
  }
  for ctx in 8192 16384; do
    "$DIR/bin/vegas" bench --backend cuda --prompts "$prompts" --context "$ctx" --batch 16 \
      --new-tokens "${TUNE_TOKENS:-128}" --mode vegas --policy auto --gamma 0 --ratio 0 "${sampled[@]}" \
      > "$OUT/auto-$ctx.json" 2> "$OUT/auto-$ctx.err" || tail -3 "$OUT/auto-$ctx.err"
    read -ra opts <<< "$(fixed_of "$ctx")"
    "$DIR/bin/vegas" bench --backend cuda --prompts "$prompts" --context "$ctx" --batch 16 \
      --new-tokens "${TUNE_TOKENS:-128}" --mode vegas "${opts[@]}" "${sampled[@]}" \
      > "$OUT/auto-$ctx-fixed.json" 2> "$OUT/auto-$ctx.err" || tail -3 "$OUT/auto-$ctx.err"
  done
  # Per prompt (batch 1, the 8K prompts at 8K and the 16K ones at 16K): auto
  # against the profile's fixed setting for that bucket.
  python3 - "$prompts" "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for i, r in enumerate(rows):
    if r["target_tokens"] in (8192, 16384):
        with open(f"{sys.argv[2]}/prompt-{r['target_tokens']}-{i:02d}.jsonl", "w") as f:
            f.write(json.dumps(r) + "\n")
PY
  for f in "$OUT"/prompt-*.jsonl; do
    ctx=$(basename "$f" | cut -d- -f2)
    fixed=$(fixed_of "$ctx")
    for setting in auto fixed; do
      if [ $setting = auto ]; then opts=(--policy auto --gamma 0 --ratio 0); else read -ra opts <<< "$fixed"; fi
      "$DIR/bin/vegas" bench --backend cuda --prompts "$f" --context "$ctx" --batch 1 --no-baseline \
        --new-tokens "${TUNE_TOKENS:-128}" --mode vegas "${opts[@]}" "${sampled[@]}" \
        > "${f%.jsonl}-$setting.json" 2>/dev/null
    done
  done
  [ "${TUNE_REPORT:-1}" = 1 ] && "$DIR/bin/vegas" bench --backend cuda --prompts "$prompts" --batch 16 --new-tokens 96 "${sampled[@]}" \
    --report "$OUT/report" --contexts 2048,8192,16384 \
    --policies vegas:0.5,vegas:0.25,vegas:0,streaming,specextend,vegas-all,quest \
    --ratios 0.03,0.05,0.07,0.1,0.15,0.2 --gammas 2,4,6,8,10 --sweep-context 8192 \
    --heatmap-policy vegas:0.5 --no-plot > "$OUT/report.out" 2> "$OUT/report.err" || tail -3 "$OUT/report.err"
  (cd "$OUT" && tar czf tune-runs.tgz --ignore-failed-read vegas-profile.json tune-sweep.json tune.err auto-*.json prompt-*.json report \
    && rm -rf prompt-*.json prompt-*.jsonl auto-*.json auto-*.err report)
fi
if [ "$WHAT" = phases ] || [ "$WHAT" = all ]; then
  # The round's phases against the vanilla step (issue P0-5): device and wall
  # time, floors, with the verify pass's rows cut down to candidates on the
  # device (what a round does), for the embedded model and Qwen3-8B shapes.
  "$DIR/bin/bench_cuda_phases" models/vegas-code-22m "$DIR/qwen3-8b.json" \
    2>&1 | tee "$OUT/phases.log" | grep -v '^{'
  summary+=("$(grep '^{' "$OUT/phases.log" | python3 -c 'import json, sys
for line in sys.stdin:
    j = json.loads(line)
    print("%s %dx%d: verify %.2f, select %.2f, draft %.2f, chained draft %.2f x vanilla" % (j["model"], j["context"], j["batch"], j["verify_over_vanilla"], j["select_over_vanilla"], j["draft_over_vanilla"], j["draft_chain_wall_ms_per_pass"] / j["vanilla_wall_ms"]))')")
fi
if [ "$WHAT" = profile-phases ]; then
  # ncu kernel durations of one verify pass and one draft step (5 of each,
  # summed per kernel and divided by the passes; kernels serialised).
  for shape in $(echo "${PROFILE_SHAPES:-8192x16,8192x64}" | tr , ' '); do
    for phase in verify draft; do
      VEGAS_PHASE_SHAPES=$shape VEGAS_PHASE_SYNTHETIC= VEGAS_PHASE_PROFILE=$phase \
        ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
        "$DIR/bin/bench_cuda_phases" models/vegas-code-22m > "$OUT/profile-$shape-$phase.csv" \
        2> "$OUT/profile-$shape-$phase.err"
      python3 tools/profile_summary.py "$OUT/profile-$shape-$phase.csv" "$shape $phase" | tee -a "$OUT/profile.txt"
    done
  done
fi
if [ "$WHAT" = timeline ]; then
  # Stamps inside the launch chain (kernels/timeline.cuh): DIR must hold a
  # -DVEGAS_TIMELINE build of bench_cuda_decode. One step shape a run.
  for shape in $(echo "${TIMELINE_SHAPES:-2048x1,8192x16d}" | tr , ' '); do
    VEGAS_BENCH_SHAPES=$shape "$DIR/bin/bench_cuda_decode" models/vegas-code-22m \
      > "$OUT/timeline-$shape.txt" 2>&1
    python3 tools/timeline_summary.py "$OUT/timeline-$shape.txt" | tee -a "$OUT/timeline.txt"
  done
fi
if [ "$WHAT" = profile ]; then
  # ncu serialises kernels (no PDL overlap): the per-kernel shares, not the step time.
  for shape in $(echo "${PROFILE_SHAPES:-2048x1,8192x16,8192x16d}" | tr , ' '); do
    VEGAS_BENCH_SHAPES=$shape ncu --clock-control none --metrics gpu__time_duration.sum \
      --launch-skip 2000 --launch-count 400 --csv "$DIR/bin/bench_cuda_decode" models/vegas-code-22m \
      > "$OUT/profile-$shape.csv" 2> "$OUT/profile-$shape.err"
    python3 tools/profile_summary.py "$OUT/profile-$shape.csv" "$shape" | tee -a "$OUT/profile.txt"
  done
fi
if [ "$WHAT" = server ]; then
  # 16 concurrent streaming clients against vegas-server on this GPU.
  for mode in vanilla vegas; do
    python3 tools/bench_server.py --server "$DIR/bin/vegas-server" --backend cuda --mode "$mode" \
      --clients 16 --requests 4 --max-tokens 64 2>&1 | tail -2
  done
fi
if [ "$WHAT" = quant ]; then
  # GGUF files of the embedded model made by llama.cpp's converter and
  # quantizer (LLAMA_SRC: its source snapshot, carried), their perplexity
  # against the model directory, greedy Vegas against vanilla with the
  # matrices forced quantized, and the Qwen3-8B shapes with bf16 / Q8_0 /
  # Q4_0 / F8 matrices (F8 at batch 4: the tensor-core kernel).
  G=${GGUF_DIR:-/tmp/vegas-gguf}
  [ -f "$G/vegas-code-22m-Q4_0.gguf" ] ||
    bash tools/gguf/make_fixtures.sh "${LLAMA_SRC:-.carry/llama/llama-src.tar.xz}" "$OUT/gguf-make" "$G" \
      > "$OUT/gguf-make.log" 2>&1 || tail -20 "$OUT/gguf-make.log"
  "$DIR/bin/vegas_perplexity" --prompts "$DIR/bench/prompts-public.jsonl" --limit 0 --tokens 2048 \
    models/vegas-code-22m "$G"/vegas-code-22m-{bf16,Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0}.gguf | tee "$OUT/perplexity.jsonl"
  for f in Q8_0 Q4_0; do
    VEGAS_CUDA_QUANT_WEIGHTS=1 "$DIR/bin/vegas" bench --model "$G/vegas-code-22m-$f.gguf" \
      --prompts "$DIR/bench/prompts-public.jsonl" --context 8192 --batch 16 --new-tokens 128 \
      --mode vegas --temperature 0 > "$OUT/greedy-$f.json" 2> "$OUT/greedy-$f.err"
    python3 -c "
import json, sys
def find(d, k):
    if isinstance(d, dict):
        if k in d: return d[k]
        for v in d.values():
            r = find(v, k)
            if r is not None: return r
print('greedy %s 8K x 16: identical to vanilla: %s' % (sys.argv[2], find(json.load(open(sys.argv[1])), 'identical_to_vanilla')))" \
      "$OUT/greedy-$f.json" "$f" || tail -3 "$OUT/greedy-$f.err"
  done
  # Batches 1, 4 and 8 (8 rows: a one-sequence verification pass), every
  # format, tensor-core quant GEMVs on (default) and off.
  for mma in default 0; do
    off="" && [ "$mma" = 0 ] && off=VEGAS_CUDA_QUANT_MMA=0
    env $off VEGAS_BENCH_SHAPES=2048x1 VEGAS_BENCH_WEIGHT_BATCHES=1,4,8 \
      VEGAS_BENCH_WEIGHTS=bf16,q8_0,q4_0,q4_k_m,q5_k_m,fp8 "$DIR/bin/bench_cuda_decode" \
      models/vegas-code-22m "$DIR/qwen3-8b.json" 2>&1 | tee "$OUT/bench-quant-mma-$mma.log" |
      sed -n '/^model /,$p' | sed "s/^/quant mma $mma: /"
  done
  # The round's phases with Q4_K_M weights (Qwen3-8B shapes).
  VEGAS_PHASE_SHAPES= VEGAS_PHASE_SYNTHETIC=32768x1,32768x4 VEGAS_PHASE_WEIGHTS=q4_k_m \
    "$DIR/bin/bench_cuda_phases" models/vegas-code-22m "$DIR/qwen3-8b.json" 2>&1 |
    tee "$OUT/phases-q4_k_m.log" | grep -v '^{'
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  "$DIR/bin/bench_cuda_decode" models/vegas-code-22m "$DIR/qwen3-8b.json" 2>&1 | tee "$OUT/bench.log"
  # The same shape through a session (`vegas bench`: batch building, sampling,
  # commits): what an embedder gets, greedy and sampled.
  for t in 0 0.6; do
    "$DIR/bin/vegas" bench --backend cuda --prompts "$DIR/bench/prompts-public.jsonl" --context 8192 \
      --batch 16 --new-tokens 128 --mode vanilla --temperature "$t" --top-k 20 --top-p 0.95 \
      > "$OUT/session-vanilla-$t.json" 2> "$OUT/session-vanilla-$t.err"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('session vanilla 8K x 16 T %s: median step %.3f ms, %.0f tok/s, %.1f%% of the floor' % (sys.argv[2], j['median_step_ms'], j['decode_tokens_per_s'], 100 * j.get('fraction_of_floor', 0)))" \
      "$OUT/session-vanilla-$t.json" "$t" | tee -a "$OUT/bench-session.log" || tail -3 "$OUT/session-vanilla-$t.err"
  done
  # A/B of the cluster split merge (off by default) on the shapes it applies to.
  VEGAS_CUDA_CLUSTER_MERGE=1 VEGAS_BENCH_SHAPES=2048x1,8192x16,16384x16 \
    "$DIR/bin/bench_cuda_decode" models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | sed 's/^/cluster-merge: /' | tee "$OUT/bench-cluster.log"
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
[ -f "$OUT/bench.log" ] && sed -n '/^model /,$p' "$OUT/bench.log" && grep -E '^(device-to-device|prefill)' "$OUT/bench.log"
exit 0
