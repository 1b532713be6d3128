#!/usr/bin/env python3
"""Trains a small draft model for a target model directory (HF Qwen3 format),
with the target's own tokenizer, by distillation: the draft learns the
target's next-token distributions (KL) on the Python sources of the installed
packages, as the embedded model was trained (../shared/models/
train_code_model.py). For vegas_session_options.draft_model. Runs on the GPU
machine (torch, transformers, tokenizers); a few minutes.

A draft as wide as the target (HIDDEN 0, the default) has the target's
attention and MLP shapes and starts from its embedding, first LAYERS layers
and final norm (a layer-skip draft), then learns to stand for the rest: on a
GPU a small model's step costs about the same whatever its width, so width
is free where depth is not.

  python3 tools/train_draft_model.py TARGET_DIR OUT_DIR [SECONDS] [LAYERS] [HIDDEN]"""
import glob
import json
import math
import os
import random
import shutil
import sys
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, Qwen3Config

T0 = time.time()
TARGET, OUT = sys.argv[1], sys.argv[2]
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 240.0
LAYERS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
HIDDEN = int(sys.argv[5]) if len(sys.argv) > 5 else 0  # 0: the target's
HELD_OUT = {"sympy", "networkx", "pandas", "scipy"}  # the target's evaluation packages
random.seed(4321)
torch.manual_seed(4321)
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")

tok = Tokenizer.from_file(os.path.join(TARGET, "tokenizer.json"))
EOT = tok.token_to_id("<|endoftext|>")
site = os.path.dirname(os.path.dirname(torch.__file__))
texts, chars = [], 0
for path in sorted(glob.glob(os.path.join(site, "**", "*.py"), recursive=True)):
    top = os.path.relpath(path, site).split(os.sep)[0]
    if top in HELD_OUT or top.endswith(".dist-info"):
        continue
    try:
        with open(path, encoding="utf-8") as f:
            s = f.read(400_001)
    except (UnicodeDecodeError, OSError):
        continue
    if 64 <= len(s) <= 400_000:
        texts.append(s)
        chars += len(s)
    if chars > 120_000_000:
        break
ids = []
for i in range(0, len(texts), 2048):
    for e in tok.encode_batch(texts[i:i + 2048], add_special_tokens=False):
        ids.extend(e.ids + [EOT])
data = torch.tensor(ids, dtype=torch.long, device=dev)
print(f"tokens {len(ids) / 1e6:.1f}M t={time.time() - T0:.0f}s", flush=True)

target = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.bfloat16).to(dev).eval()
tc = target.config
HIDDEN = HIDDEN or tc.hidden_size
as_wide = HIDDEN == tc.hidden_size
cfg = Qwen3Config(
    vocab_size=tc.vocab_size, hidden_size=HIDDEN,
    intermediate_size=tc.intermediate_size if as_wide else 2 * HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=tc.num_attention_heads if as_wide else max(1, HIDDEN // 64),
    num_key_value_heads=tc.num_key_value_heads if as_wide else 1,
    head_dim=64, max_position_embeddings=tc.max_position_embeddings,
    rope_theta=(getattr(tc, "rope_parameters", None) or {}).get(
        "rope_theta", getattr(tc, "rope_theta", 1_000_000.0)), rms_norm_eps=tc.rms_norm_eps,
    tie_word_embeddings=True, attention_bias=False, hidden_act="silu",
    bos_token_id=tc.bos_token_id, eos_token_id=tc.eos_token_id, pad_token_id=tc.pad_token_id)
draft = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").to(dev)
if as_wide:  # start as the target's first LAYERS layers (tools/layer_skip_draft.py)
    own = draft.state_dict()
    start = {k: v.float() for k, v in target.state_dict().items()
             if k in own and own[k].shape == v.shape}
    missing = [k for k in own if k not in start]
    draft.load_state_dict(start, strict=False)
    print(f"draft starts from the target's first {LAYERS} layers; not copied: {missing}",
          flush=True)
print(f"draft params {sum(p.numel() for p in draft.parameters()) / 1e6:.2f}M", flush=True)
PEAK = 1e-3 if as_wide else 2e-3  # a started draft needs a gentler start
opt = torch.optim.AdamW(draft.parameters(), lr=PEAK, betas=(0.9, 0.95), weight_decay=0.1,
                        fused=True)
SEQ, BATCH, WARM = 4096, 16, 50


def batch():
    idx = torch.randint(0, data.numel() - SEQ - 1, (BATCH,), device=dev)
    return torch.stack([data[i:i + SEQ] for i in idx.tolist()])


t_start, step, total = time.time(), 0, None
while time.time() - t_start < SECONDS:
    if step == 20:
        total = int(SECONDS / ((time.time() - t_start) / 20))
    frac = 0.0 if total is None else min(1.0, max(0, step - WARM) / max(1, total - WARM))
    lr = PEAK * (step + 1) / WARM if step < WARM else 1e-4 + (PEAK - 1e-4) * 0.5 * (1 + math.cos(
        math.pi * frac))
    for g in opt.param_groups:
        g["lr"] = lr
    x = batch()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        teacher = F.log_softmax(target(input_ids=x).logits.float(), dim=-1)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        student = F.log_softmax(draft(input_ids=x).logits.float(), dim=-1)
    # KL(target || draft): the draft learns the distributions it will be tested against.
    loss = F.kl_div(student.flatten(0, 1), teacher.flatten(0, 1), log_target=True,
                    reduction="batchmean")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0:
        print(f"step {step} kl {loss.item():.3f} lr {lr:.2e} t={time.time() - T0:.0f}s", flush=True)
    step += 1
draft = draft.eval().to(torch.bfloat16)
draft.save_pretrained(OUT, safe_serialization=True)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(TARGET, name), OUT)
with open(os.path.join(OUT, "draft_training.json"), "w") as f:
    json.dump({"target": os.path.abspath(TARGET), "steps": step, "seconds": SECONDS,
               "layers": LAYERS, "hidden": HIDDEN, "from_target_layers": as_wide,
               "last_kl": loss.item()}, f, indent=2)
print(f"done: {step} steps, kl {loss.item():.3f}, t={time.time() - T0:.0f}s", flush=True)
