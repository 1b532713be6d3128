#!/usr/bin/env python3
"""Streams a completion of a code prompt with the embedded model, through the Python binding.

    VEGAS_LIBRARY=build/lib/libvegas.so python3 samples/python/complete.py 'def quicksort(xs):\n'

Without `pip install ./bindings/python` it uses the package from the source tree; without
VEGAS_LIBRARY it tries build/lib/libvegas.so, then the system loader."""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
try:
    import vegas
except ImportError:
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
    import vegas
if "VEGAS_LIBRARY" not in os.environ and (ROOT / "build" / "lib" / "libvegas.so").exists():
    os.environ["VEGAS_LIBRARY"] = str(ROOT / "build" / "lib" / "libvegas.so")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prompt", nargs="?", default="def quicksort(xs):\n")
    ap.add_argument("--model", default=str(ROOT / "models" / "vegas-code-22m"))
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    args = ap.parse_args()
    prompt = args.prompt.encode().decode("unicode_escape")  # '\n' on the command line
    try:
        with vegas.Model(args.model, backend=args.backend) as model:
            print(prompt, end="")
            for piece in model.stream(prompt, max_tokens=args.max_tokens):
                print(piece, end="", flush=True)
            print()
    except vegas.VegasError as e:
        print(f"vegas: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
