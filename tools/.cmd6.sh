set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
D=.carry/cuda
VEGAS_BENCH_SHAPES=2048x1 ncu --clock-control none -k regex:layer_tail --launch-skip 20 --launch-count 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__warps_launched.sum,gpu__time_duration.sum" $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | grep -E "stalled|inst_exec|cycles|warps_launched|duration" | awk '$NF+0 > 0.05' 
VEGAS_BENCH_SHAPES=2048x1 ncu --clock-control none -k regex:layer_tail --launch-skip 20 --launch-count 1 --section SourceCounters $D/bin/bench_cuda_decode models/vegas-code-22m 2>&1 | grep -v "^ *-* *$" | sed -n '/Source Counters/,$p' | head -40
