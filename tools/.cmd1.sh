set -u
rm -rf .carry/cuda; tar -xJf .carry/cuda.tar.xz -C .carry
export VEGAS_SHARED_DIR=$PWD/.carry/cuda LD_LIBRARY_PATH=$PWD/.carry/cuda/lib VEGAS_MODEL_DIR=$PWD/models/vegas-code-22m VEGAS_SOURCE_DIR=$PWD
PROFILE_SHAPES=8192x16,8192x64 bash tools/device-check.sh .carry/cuda profile-phases > $OUT/pp.log 2>&1
PROFILE_SHAPES=2048x1 bash tools/device-check.sh .carry/cuda profile > $OUT/p.log 2>&1
cat $OUT/profile.txt
