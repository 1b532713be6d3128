set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
D=.carry/cuda
timeout 120 $D/bin/test_cuda_layer_tail 2>&1 | grep -E "layer-tail|OK|FAILED|Failure|error|rel L2|Expected|Which|actual" | head -40
for v in 0 1; do
  echo "== tail $v"
  VEGAS_CUDA_LAYER_TAIL=$v VEGAS_BENCH_SHAPES=2048x1,8192x16,8192x64 timeout 200 $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | head -8
  VEGAS_CUDA_LAYER_TAIL=$v VEGAS_PHASE_SHAPES=8192x16,8192x64 timeout 200 $D/bin/bench_cuda_phases models/vegas-code-22m 2>/dev/null | python3 -c '
import json,sys
for line in sys.stdin:
    try: j=json.loads(line)
    except Exception: continue
    print("%dx%d vanilla %.3f ms verify %.2f select %.2f draft %.2f" % (j["context"], j["batch"], j["vanilla_device_ms"], j["verify_over_vanilla"], j["select_over_vanilla"], j["draft_over_vanilla"]))'
done
