#!/usr/bin/env bash
# README command 1: install what is missing, build, and complete a code prompt
# with the embedded model, streaming to the terminal.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
"$root/tools/build.sh"
prompt=${1:-'def fibonacci(n):
    """Return the n-th Fibonacci number."""
'}
printf '%s' "$prompt"
"${VEGAS_BUILD_DIR:-$root/build}/bin/vegas" generate --prompt "$prompt" --max-tokens 96 \
  --temperature 0.6 --top-p 0.95 --top-k 20 --seed 7
