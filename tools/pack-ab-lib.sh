#!/usr/bin/env bash
# Packs two builds of libvegas for an A/B on the GPU machine: "new" from the
# working tree, "old" with FILE... taken from REV (everything else as now),
# beside the vegas CLI, which finds either through LD_LIBRARY_PATH.
#   usage: tools/pack-ab-lib.sh REV FILE... [build_dir via B=build-cuda]
#   writes .carry/ab.tar.xz (carry it); on the device:
#     tar -xJf .carry/ab.tar.xz -C .carry
#     LD_LIBRARY_PATH=$PWD/.carry/ab/old:$PWD/.carry/ab/lib:<cublas dir> .carry/ab/bin/vegas bench ...
#     (then the same with .carry/ab/new)
# The working tree's FILEs are restored however the script ends.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 REV FILE..." >&2; exit 2; }
REV=$1
shift
B=${B:-build-cuda}
[ -f "$B/CMakeCache.txt" ] ||
  cmake -S . -B "$B" -G Ninja -DVEGAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
rm -rf .carry/ab && mkdir -p .carry/ab/old .carry/ab/new .carry/ab/bin .carry/ab/lib
ninja -C "$B" -j2 bin/vegas lib/libvegas.so.0.1.0 > /dev/null
strip -o .carry/ab/new/libvegas.so.0 "$B/lib/libvegas.so.0"
strip -o .carry/ab/bin/vegas "$B/bin/vegas"
saved=$(mktemp -d)
restore() {
  for f in "$@"; do cp "$saved/$(echo "$f" | tr / _)" "$f"; done
  rm -rf "$saved"
}
for f in "$@"; do cp "$f" "$saved/$(echo "$f" | tr / _)"; done
trap 'restore "$@"' EXIT
for f in "$@"; do git show "$REV:$f" > "$f"; done
ninja -C "$B" -j2 lib/libvegas.so.0.1.0 > /dev/null
strip -o .carry/ab/old/libvegas.so.0 "$B/lib/libvegas.so.0"
restore "$@"
trap - EXIT
ninja -C "$B" -j2 lib/libvegas.so.0.1.0 > /dev/null  # the tree's build again
. tools/carry-libs.sh
copy_carry_libs .carry/ab/lib .carry/ab/bin/vegas .carry/ab/new/libvegas.so.0
cp ../shared/bench/prompts-public.jsonl .carry/ab/
tar -cf - -C .carry ab | xz --lzma2=preset=6,dict=768MiB -T2 > .carry/ab.tar.xz
ls -la .carry/ab.tar.xz
