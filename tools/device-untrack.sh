#!/usr/bin/env bash
# Makes room under the device tool's 64 MiB for a larger carry: `on` takes the
# test fixtures that no device call reads out of what travels (the index
# forgets them and .git/info/exclude ignores them; the files stay on disk),
# `off` puts them back. Run `off` before any commit: while `on`, `git status`
# shows them as deleted from the index.
#   usage: tools/device-untrack.sh on|off
# With `on`, test_cuda_golden's tiny-model cases fail for want of their
# fixtures (the embedded model's stay): carry them when you run that test.
set -eu
cd "$(dirname "$0")/.."
paths=(tests/fixtures/gguf tests/fixtures/mistral tests/fixtures/qwen2_linear tests/fixtures/qwen2
  tests/fixtures/llama_yarn tests/fixtures/llama3)
exclude=.git/info/exclude
case "${1:-}" in
  on)
    git rm -r -q --cached "${paths[@]}"
    for p in "${paths[@]}"; do grep -qx "/$p/" "$exclude" || echo "/$p/" >> "$exclude"; done
    ;;
  off)
    git reset -q -- "${paths[@]}"
    for p in "${paths[@]}"; do sed -i "\#^/$p/\$#d" "$exclude"; done
    ;;
  *)
    echo "usage: $0 on|off" >&2
    exit 2
    ;;
esac
git ls-files -z | du -c --files0-from=- | tail -1 | sed 's/total/KiB tracked (in blocks)/'
