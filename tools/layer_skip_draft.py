#!/usr/bin/env python3
"""Makes a layer-skip draft model from a Hugging Face model directory (one
model.safetensors): the first N decoder layers, the embedding, final norm and
head, the same tokenizer. A real draft for vegas_session_options.draft_model
(it shares the target's first layers), until a trained one exists.

Usage: tools/layer_skip_draft.py MODEL_DIR OUT_DIR N_LAYERS"""
import json
import os
import re
import shutil
import struct
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    if not 1 <= n <= config["num_hidden_layers"]:
        print(f"N_LAYERS must be in [1, {config['num_hidden_layers']}]", file=sys.stderr)
        return 2
    config["num_hidden_layers"] = n
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][:n]
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    layer = re.compile(r"model\.layers\.(\d+)\.")
    kept, blobs, offset = {}, [], 0
    for name, info in header.items():
        if name == "__metadata__":
            kept[name] = info
            continue
        m = layer.match(name)
        if m and int(m.group(1)) >= n:
            continue
        begin, end = info["data_offsets"]
        blobs.append(data[begin:end])
        kept[name] = dict(info, data_offsets=[offset, offset + end - begin])
        offset += end - begin
    os.makedirs(out, exist_ok=True)
    text = json.dumps(kept).encode()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), out)
    print(f"{out}: {n} of the layers, {offset} bytes of weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
