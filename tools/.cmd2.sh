set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
D=.carry/cuda
for shape in 8192x16 8192x64; do
  VEGAS_PHASE_SHAPES=$shape VEGAS_PHASE_SYNTHETIC= VEGAS_PHASE_PROFILE=verify \
   ncu --clock-control none --profile-from-start off -k regex:verify_warps --launch-skip 3 --launch-count 1 \
   --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
   $D/bin/bench_cuda_phases models/vegas-code-22m > $OUT/ncu-verify-$shape.txt 2>&1
  VEGAS_PHASE_SHAPES=$shape VEGAS_PHASE_SYNTHETIC= VEGAS_PHASE_PROFILE=verify \
   ncu --clock-control none --profile-from-start off -k regex:small_gemm --launch-skip 3 --launch-count 3 \
   --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
   $D/bin/bench_cuda_phases models/vegas-code-22m > $OUT/ncu-gemm-$shape.txt 2>&1
done
VEGAS_PHASE_SHAPES=8192x16 VEGAS_PHASE_SYNTHETIC= VEGAS_PHASE_PROFILE=draft \
   ncu --clock-control none --profile-from-start off -k regex:small_gemm --launch-skip 3 --launch-count 3 \
   --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
   $D/bin/bench_cuda_phases models/vegas-code-22m > $OUT/ncu-gemm-draft.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Grid Size|Registers|Block Size|Waves|Theoretical Occ" $OUT/ncu-*.txt | cut -c1-160
