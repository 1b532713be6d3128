set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
D=.carry/cuda
timeout 120 $D/bin/test_cuda_layer_tail 2>&1 | grep -E "OK|FAILED|Failure" | head -10
VEGAS_BENCH_SHAPES=2048x1 ncu --clock-control none -k regex:layer_tail --launch-skip 20 --launch-count 1 --section SpeedOfLight $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | grep -E "Duration"
VEGAS_BENCH_SHAPES=2048x1 ncu --cache-control none --clock-control none -k regex:layer_tail --launch-skip 20 --launch-count 1 --section SpeedOfLight $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | grep -E "Duration"
for v in 0 1; do
  echo "== tail $v"
  VEGAS_CUDA_LAYER_TAIL=$v VEGAS_BENCH_SHAPES=2048x1,8192x16,8192x64 timeout 200 $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | head -4
done
