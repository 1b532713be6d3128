#!/usr/bin/env python3
"""Makes the GGML dequantization fixture that tests/unit/test_gguf_types.cpp
checks runtime/gguf/ggml_types.cpp against: random blocks of every type
libvegas dequantizes, with the float32 values the `gguf` Python package
(gguf-py, llama.cpp's own GGUF library) dequantizes them to.

A fixture generator only; CI does not run it. Needs numpy and gguf:

    python3 -m pip install gguf
    python3 tools/make_gguf_quant_fixture.py            # writes tests/fixtures/gguf/
    python3 tools/make_gguf_quant_fixture.py --out DIR  # elsewhere

The output is deterministic for a given seed and gguf version.

For each type: N_BLOCKS blocks of random bytes (a fixed seed), except that
every fp16 scale field (d, dmin, m) is overwritten with a finite value of
moderate magnitude (|x| in [2^-8, 4], random sign) so that no block holds an
inf or NaN scale; block 0's scale fields are fp16 subnormals instead, to
exercise that conversion path. F32/F16/BF16 (one value per "block") get
N_PLAIN random values: F32 and BF16 keep any bit pattern (both are bit moves),
F16 has its NaN patterns replaced (hardware half->float conversion may quiet
a signalling NaN, which is not a property of the format) and a few special
values (zeros, subnormals, max, infinities) placed first.

Writes
  <out>/quant_blocks.bin   for each type, its raw blocks then the expected
                           values as little-endian float32, back to back;
  <out>/quant_blocks.json  "types": per type name, type id, n_blocks, n_values,
                           data_offset/data_bytes (raw blocks) and
                           expected_offset (n_values float32) into the .bin;
                           "quant_sizes": gguf.constants.GGML_QUANT_SIZES for
                           every type id gguf-py knows (name, type,
                           block_elems, block_bytes); the gguf version and seed.
"""

import argparse
import importlib.metadata
import json
import os

import numpy as np
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

SEED = 20240601
N_BLOCKS = 16
N_PLAIN = 256

# Byte offsets of the fp16 scale fields inside one block.
SCALE_FIELDS = {
    T.Q4_0: [0],  # d
    T.Q4_1: [0, 2],  # d, m
    T.Q5_0: [0],  # d
    T.Q5_1: [0, 2],  # d, m
    T.Q8_0: [0],  # d
    T.Q4_K: [0, 2],  # d, dmin
    T.Q5_K: [0, 2],  # d, dmin
    T.Q6_K: [208],  # d (after ql, qh, scales)
}
PLAIN = [T.F32, T.F16, T.BF16]


def moderate_f16(rng, n):
    mag = np.exp2(rng.uniform(-8.0, 2.0, size=n))
    sign = np.where(rng.integers(0, 2, size=n) == 1, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def subnormal_f16(rng, n):
    bits = rng.integers(1, 0x400, size=n, dtype=np.uint16)
    bits |= np.where(rng.integers(0, 2, size=n) == 1, 0x8000, 0).astype(np.uint16)
    return bits.view(np.float16)


def quant_blocks(rng, qtype):
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(N_BLOCKS, type_size), dtype=np.uint8)
    for off in SCALE_FIELDS[qtype]:
        vals = moderate_f16(rng, N_BLOCKS)
        vals[0] = subnormal_f16(rng, 1)[0]
        blocks[:, off:off + 2] = vals.view(np.uint8).reshape(N_BLOCKS, 2)
    return blocks.reshape(-1)


def plain_values(rng, qtype):
    if qtype == T.F32:
        return rng.integers(0, 2**32, size=N_PLAIN, dtype=np.uint32).view(np.uint8)
    bits = rng.integers(0, 2**16, size=N_PLAIN, dtype=np.uint16)
    if qtype == T.F16:
        nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
        bits[nan] &= 0xBFFF  # clear the exponent's top bit: finite
        bits[:8] = [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00]
    return bits.view(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "gguf"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.default_rng(SEED)
    blob = bytearray()
    types = []
    for qtype in PLAIN + list(SCALE_FIELDS):
        block_elems, type_size = GGML_QUANT_SIZES[qtype]
        raw = plain_values(rng, qtype) if qtype in PLAIN else quant_blocks(rng, qtype)
        expected = np.asarray(quants.dequantize(raw, qtype), dtype=np.float32).reshape(-1)
        n_blocks = raw.size // type_size
        assert expected.size == n_blocks * block_elems
        entry = {
            "name": qtype.name,
            "type": int(qtype),
            "n_blocks": int(n_blocks),
            "n_values": int(expected.size),
            "data_offset": len(blob),
            "data_bytes": int(raw.size),
        }
        blob += raw.tobytes()
        entry["expected_offset"] = len(blob)
        blob += expected.astype("<f4").tobytes()
        types.append(entry)

    sizes = [{"name": t.name, "type": int(t), "block_elems": int(be), "block_bytes": int(bb)}
             for t, (be, bb) in sorted(GGML_QUANT_SIZES.items(), key=lambda kv: int(kv[0]))]
    meta = {
        "generator": "tools/make_gguf_quant_fixture.py",
        "gguf_version": importlib.metadata.version("gguf"),
        "numpy_version": np.__version__,
        "seed": SEED,
        "bin": "quant_blocks.bin",
        "bin_bytes": len(blob),
        "types": types,
        "quant_sizes": sizes,
    }
    with open(os.path.join(args.out, "quant_blocks.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(args.out, "quant_blocks.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {len(types)} types, {len(blob)} bytes to {args.out}")


if __name__ == "__main__":
    main()
