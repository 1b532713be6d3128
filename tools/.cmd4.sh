set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
D=.carry/cuda
VEGAS_BENCH_SHAPES=2048x1 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 2000 --launch-count 200 --csv $D/bin/bench_cuda_decode models/vegas-code-22m > $OUT/p.csv 2>$OUT/p.err
python3 tools/profile_summary.py $OUT/p.csv "2048x1 tail"
VEGAS_BENCH_SHAPES=2048x1 ncu --clock-control none -k regex:layer_tail --launch-skip 20 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis $D/bin/bench_cuda_decode models/vegas-code-22m > $OUT/ncu-tail.txt 2>&1
grep -E "Duration|Throughput|Warp Cycles|L2 Hit|stalled|Eligible" $OUT/ncu-tail.txt | head -20
echo "== cluster 8"
VEGAS_CUDA_TAIL_CLUSTER=8 VEGAS_BENCH_SHAPES=2048x1,8192x16 timeout 200 $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | head -4
echo "== no pdl, tail 0 / 1"
VEGAS_CUDA_PDL=0 VEGAS_CUDA_LAYER_TAIL=0 VEGAS_BENCH_SHAPES=2048x1 timeout 200 $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | head -3
VEGAS_CUDA_PDL=0 VEGAS_BENCH_SHAPES=2048x1 timeout 200 $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | sed -n '/^model /,$p' | head -3
