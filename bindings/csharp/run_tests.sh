#!/bin/sh
# Runs by ctest (bindings/csharp/ctest.cmake sets the environment): builds the
# binding as Vegas.dll and the NUnit-free test executable with Mono's mcs, runs
# the tests with mono (exit code = failures), then builds and runs the sample.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$VEGAS_CS_OUT
mkdir -p "$out"
"$MCS" -nologo -target:library -warnaserror+ -out:"$out/Vegas.dll" "$here"/src/*.cs
"$MCS" -nologo -warnaserror+ -r:System.Core.dll -out:"$out/VegasTests.exe" "$here"/src/*.cs "$here"/tests/*.cs
"$MONO" --debug "$out/VegasTests.exe"
"$MCS" -nologo -warnaserror+ -r:"$out/Vegas.dll" -out:"$out/complete.exe" "$here/../../samples/csharp/Complete.cs"
sample=$("$MONO" "$out/complete.exe" "$VEGAS_MODEL_DIR" "def quicksort(xs):
" 8 2>&1)
printf '%s\n' "$sample"
case "$sample" in
  *"[8 tokens]"*) ;;
  *) echo "run_tests.sh: the C# sample did not stream 8 pieces" >&2; exit 1 ;;
esac
