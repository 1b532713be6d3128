#!/bin/sh
# Runs by ctest (bindings/go/ctest.cmake sets the environment): vet and test the
# binding, then build and run the sample on the embedded model.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
"$GO" vet ./...
"$GO" test -count=1 ./...
cd "$here/../../samples/go"
"$GO" vet ./...
"$GO" build -o "$VEGAS_GO_OUT/complete" ./complete
out=$("$VEGAS_GO_OUT/complete" -model "$VEGAS_MODEL_DIR" -max-tokens 8 2>&1)
printf '%s\n' "$out"
case "$out" in
  *"[8 tokens, finished by length]"*) ;;
  *) echo "run_tests.sh: the Go sample did not stream 8 tokens" >&2; exit 1 ;;
esac
