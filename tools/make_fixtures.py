#!/usr/bin/env python3
"""Makes the golden fixtures that tests/unit/test_golden.cpp (CPU) and the CUDA
golden test compare libvegas against: reference outputs of Hugging Face
transformers.

Runs on the GPU machine (torch, transformers 5.x, safetensors, tokenizers,
numpy); a CPU works too but the embedded-model part is slow there.

    python3 tools/make_fixtures.py --out tests/fixtures --shared <dir holding bench/prompts-public.jsonl>

Writes
  <out>/<tiny>/          one tiny random model per supported architecture and
                         rope variant (see TINY_MODELS): config.json,
                         generation_config.json, model.safetensors (bf16),
                         hidden_f32.bin  raw little-endian float32 [64][hidden]:
                                         f32-math final hidden states (after the
                                         final norm) of every prompt position; the
                                         logits of every position are these times
                                         the checkpoint's lm_head (tests rebuild
                                         them in double),
                         logits_rows_f32.bin  float32 [len(logits_rows)][vocab]:
                                         f32-math logits of a few positions as
                                         transformers computed them, to check
                                         that rebuild,
                         fixture.json    prompt_ids, greedy_ids (32, f32 math),
                                         greedy_margins (top1 - top2 logit at each
                                         greedy step), bf16-math logit error.
  <out>/embedded/greedy_2k.json   every 2K public prompt: 64 greedy tokens with
                         f32 math and with bf16 math, each with per-step margins.
  <out>/embedded/greedy_8k.json   every 8K public prompt: 64 greedy tokens, bf16.

"f32 math" = the bf16 checkpoint loaded, cast to float32, eager attention, TF32
off; "bf16 math" = the checkpoint in bf16 with SDPA, as people serve it.
Greedy continuations are computed with a manual KV-cached loop (prefill, then
one token per step), the same shape of computation the runtime does, and never
stop at an end-of-text token.
"""

import argparse
import inspect
import json
import os
import shutil
import sys
import time

T0 = time.time()


def die(message):
    print(f"make_fixtures: error: {message}", file=sys.stderr)
    sys.exit(1)


try:
    import numpy as np
    import torch
    import transformers
    from safetensors import safe_open
    from tokenizers import Tokenizer
except ImportError as e:  # pragma: no cover - depends on the machine
    die(f"python package '{e.name}' is missing; this script needs torch, transformers 5.x, "
        f"safetensors, tokenizers and numpy (run it on the GPU machine)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20240607
PROMPT_LEN = 64          # tokens of the tiny models' prompt
TINY_GREEDY = 32         # greedy tokens recorded for the tiny models
EMBEDDED_GREEDY = 64     # greedy tokens recorded for the embedded model's prompts
VOCAB = 8192

# Tiny models: hidden 32, 2 layers, head_dim 16, SwiGLU 64. Weight scales are
# far above a trained model's init so that attention is clearly non-uniform and
# logits spread over several units: a runtime that drops a bias, a norm weight
# or a rope detail then misses the reference by much more than the tolerance.
EMBED_STD = 0.5
LINEAR_STD = 0.15
NORM_STD = 0.2    # norm weights = 1 + NORM_STD * N(0,1)
BIAS_STD = 0.3

# Hidden 32 keeps each checkpoint near 1 MB: the embedded model (42 MB) and
# the fixtures must travel together to the GPU machine within its 64 MiB limit.
HIDDEN = 32
LOGIT_ROWS = [0, 21, 42, 63]  # positions whose full logits are stored as computed
COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
              hidden_act="silu", bos_token_id=0, eos_token_id=0, pad_token_id=0)

# name -> what it covers, config class, config overrides, rope parameters, and
# structural facts checked after building (so a transformers change that drops a
# feature fails here instead of producing a fixture that tests nothing).
TINY_MODELS = [
    dict(name="qwen3", covers="Qwen3: per-head q/k RMSNorm, tied embeddings, GQA 2",
         config="Qwen3Config", overrides=dict(tie_word_embeddings=True, attention_bias=False),
         rope=dict(rope_type="default", rope_theta=1_000_000.0), max_position=4096,
         expect=dict(qk_norm=True, qkv_bias=False, tied=True)),
    dict(name="qwen2", covers="Qwen2: q/k/v bias, untied lm_head, GQA 2",
         config="Qwen2Config", overrides=dict(tie_word_embeddings=False),
         rope=dict(rope_type="default", rope_theta=1_000_000.0), max_position=4096,
         expect=dict(qk_norm=False, qkv_bias=True, tied=False)),
    # original_max_position 256 puts the head_dim-16 frequencies in all three
    # llama3 bands (kept, smoothed, divided by factor) at theta 1e4.
    dict(name="llama3", covers="Llama with llama3 rope scaling (all three bands), untied",
         config="LlamaConfig", overrides=dict(tie_word_embeddings=False),
         rope=dict(rope_type="llama3", rope_theta=10_000.0, factor=8.0, low_freq_factor=1.0,
                   high_freq_factor=4.0, original_max_position_embeddings=256),
         max_position=2048, expect=dict(qk_norm=False, qkv_bias=False, tied=False)),
    dict(name="mistral", covers="Mistral: 8 query / 2 KV heads (GQA 4), q_dim 128 != hidden 32",
         config="MistralConfig",
         overrides=dict(num_attention_heads=8, num_key_value_heads=2, sliding_window=None,
                        tie_word_embeddings=False),
         rope=dict(rope_type="default", rope_theta=10_000.0), max_position=4096,
         expect=dict(qk_norm=False, qkv_bias=False, tied=False)),
    # original_max_position 256 gives a yarn ramp over dims 0..4 of the 8
    # frequency pairs: extrapolated, blended and interpolated frequencies all
    # occur; attention_factor is left to its derived default 0.1 ln(4) + 1.
    dict(name="llama_yarn", covers="Llama with yarn rope scaling (derived attention factor)",
         config="LlamaConfig", overrides=dict(tie_word_embeddings=False),
         rope=dict(rope_type="yarn", rope_theta=10_000.0, factor=4.0,
                   original_max_position_embeddings=256, beta_fast=32.0, beta_slow=1.0),
         max_position=1024, expect=dict(qk_norm=False, qkv_bias=False, tied=False)),
    dict(name="qwen2_linear", covers="Qwen2 with linear rope scaling (factor 2), q/k/v bias",
         config="Qwen2Config", overrides=dict(tie_word_embeddings=False),
         rope=dict(rope_type="linear", rope_theta=10_000.0, factor=2.0), max_position=4096,
         expect=dict(qk_norm=False, qkv_bias=True, tied=False)),
]

# The tiny models' prompt: tokenized with the embedded tokenizer, first 64 ids.
PROMPT_TEXT = '''import os
from dataclasses import dataclass, field


@dataclass
class Inventory:
    """Counts items by name and keeps the history of every change."""

    items: dict = field(default_factory=dict)
    history: list = field(default_factory=list)

    def add(self, name: str, count: int = 1) -> int:
        if count <= 0:
            raise ValueError(f"count must be positive, got {count}")
        self.items[name] = self.items.get(name, 0) + count
        self.history.append(("add", name, count))
        return self.items[name]
'''


# ----------------------------------------------------------------- helpers

def check_versions():
    transformers.logging.disable_progress_bar()
    major = int(transformers.__version__.split(".")[0])
    if major < 5:
        die(f"transformers {transformers.__version__} found; 5.x is required (its config.json "
            f"format, rope_parameters, is what the fixtures must exercise)")


def pick_device(requested):
    if requested == "cuda":
        if not torch.cuda.is_available():
            die("--device cuda but torch sees no GPU (pass --device cpu to run slowly on the CPU)")
        # f32 means f32: no TF32 in matmuls or convolutions.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch.device(requested)


def load_tokenizer(model_dir):
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(path):
        die(f"{path} not found (pass --model-dir)")
    tok = Tokenizer.from_file(path)
    if tok.get_vocab_size() != VOCAB:
        die(f"{path}: vocab size {tok.get_vocab_size()}, expected {VOCAB}")
    eot = tok.token_to_id("<|endoftext|>")
    if eot is None:
        die(f"{path}: no <|endoftext|> token")
    return tok, eot


def encode(tok, eot, text, what):
    ids = tok.encode(text, add_special_tokens=False).ids
    # <|endoftext|> must come out as the one special token, never as pieces.
    if ids.count(eot) != text.count("<|endoftext|>"):
        die(f"{what}: <|endoftext|> appears {text.count('<|endoftext|>')} times in the text but "
            f"{ids.count(eot)} times in the ids")
    return ids


def margin_of(logits_row):
    top = torch.topk(logits_row.float(), 2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])


@torch.no_grad()
def greedy(model, prompt_ids, n_new, device):
    """Prefill, then one token per step with the KV cache; returns (ids, margins)."""
    out = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True)
    past = out.past_key_values
    row = out.logits[0, -1]
    ids, margins = [], []
    for step in range(n_new):
        tok, margin = margin_of(row)
        ids.append(tok)
        margins.append(margin)
        if step + 1 == n_new:
            break
        out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past,
                    use_cache=True)
        past = out.past_key_values
        row = out.logits[0, -1]
    return ids, margins


def load_model(model_dir, dtype, attn, device):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=dtype, attn_implementation=attn)
    model = model.to(device).eval()
    for name, p in model.named_parameters():
        if p.dtype != dtype:
            die(f"{model_dir}: parameter {name} loaded as {p.dtype}, expected {dtype}")
    return model


def check_loaded_weights(model, model_dir):
    """Every parameter of the loaded model equals the checkpoint's tensor (catches
    transformers silently re-initialising a weight it did not find)."""
    path = os.path.join(model_dir, "model.safetensors")
    state = model.state_dict()
    with safe_open(path, framework="pt") as f:
        names = set(f.keys())
        for name in names:
            if name not in state:
                die(f"{path}: tensor {name} is not a parameter of the loaded model")
            saved = f.get_tensor(name)
            if saved.dtype != torch.bfloat16:
                die(f"{path}: tensor {name} is {saved.dtype}, expected bfloat16")
            if not torch.equal(saved.float(), state[name].detach().float().cpu()):
                die(f"{path}: tensor {name} differs after loading")
    for name, p in model.named_parameters():
        tied_head = name == "lm_head.weight" and model.config.tie_word_embeddings
        if name not in names and not tied_head:
            die(f"{path}: the model has parameter {name} but the checkpoint does not")
    return names


# ------------------------------------------------------------- tiny models

def init_weights(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # named_parameters() lists a tied lm_head once, as the embedding.
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith(".bias"):
                p.copy_(BIAS_STD * noise)
            elif p.ndim == 1:  # RMSNorm weights (input, post-attention, q/k, final)
                p.copy_(1.0 + NORM_STD * noise)
            elif "embed_tokens" in name:
                p.copy_(EMBED_STD * noise)
            else:
                p.copy_(LINEAR_STD * noise)


def build_config(spec):
    cls = getattr(transformers, spec["config"], None)
    if cls is None:
        die(f"transformers {transformers.__version__} has no {spec['config']}")
    kwargs = dict(COMMON)
    kwargs.update(spec["overrides"])
    kwargs["max_position_embeddings"] = spec["max_position"]
    kwargs["rope_parameters"] = dict(spec["rope"])
    config = cls(**kwargs)
    # Whatever the constructor did with them, the parameters must have landed.
    rp = getattr(config, "rope_parameters", None)
    if not isinstance(rp, dict):
        die(f"{spec['name']}: config.rope_parameters is {rp!r}, expected a dict")
    for key, value in spec["rope"].items():
        if rp.get(key) != value:
            die(f"{spec['name']}: rope_parameters[{key!r}] = {rp.get(key)!r}, expected {value!r}")
    for key, value in kwargs.items():
        if key != "rope_parameters" and getattr(config, key, value) != value:
            die(f"{spec['name']}: config.{key} = {getattr(config, key)!r}, expected {value!r}")
    return config


def check_structure(spec, model, saved_names):
    name, expect = spec["name"], spec["expect"]
    heads = model.config.num_attention_heads
    wq = model.model.layers[0].self_attn.q_proj.weight
    if tuple(wq.shape) != (heads * 16, HIDDEN):
        die(f"{name}: q_proj is {tuple(wq.shape)}, expected ({heads * 16}, {HIDDEN})")
    has_qk_norm = "model.layers.0.self_attn.q_norm.weight" in saved_names
    has_bias = "model.layers.0.self_attn.q_proj.bias" in saved_names
    has_head = "lm_head.weight" in saved_names
    if has_qk_norm != expect["qk_norm"]:
        die(f"{name}: q_norm present={has_qk_norm}, expected {expect['qk_norm']}")
    if has_bias != expect["qkv_bias"]:
        die(f"{name}: q/k/v bias present={has_bias}, expected {expect['qkv_bias']}")
    if has_head == expect["tied"]:
        die(f"{name}: lm_head.weight saved={has_head} but tied={expect['tied']}")


def make_tiny(spec, index, tok, eot, model_dir, out_root, device):
    name = spec["name"]
    out = os.path.join(out_root, name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    t = time.time()

    torch.manual_seed(SEED + index)
    config = build_config(spec)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    init_weights(model, SEED + index)
    model = model.to(torch.bfloat16).eval()
    save_kwargs = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        save_kwargs["safe_serialization"] = True
    model.save_pretrained(out, **save_kwargs)
    del model
    # No tokenizer copy: the tiny models use the embedded model's tokenizer
    # (the prompt ids are in fixture.json), which keeps the fixtures small.
    if not os.path.isfile(os.path.join(out, "model.safetensors")):
        die(f"{out}: save_pretrained wrote no single model.safetensors: {sorted(os.listdir(out))}")

    prompt = encode(tok, eot, PROMPT_TEXT, "tiny prompt")
    if len(prompt) < PROMPT_LEN:
        die(f"the tiny prompt has only {len(prompt)} tokens, need {PROMPT_LEN}")
    prompt = prompt[:PROMPT_LEN]

    # f32 math: the saved bf16 weights, cast to f32, eager attention.
    model = load_model(out, torch.float32, "eager", device)
    saved = check_loaded_weights(model, out)
    check_structure(spec, model, saved)
    with torch.no_grad():
        ids = torch.tensor([prompt], device=device)
        logits = model(input_ids=ids, use_cache=False).logits
        hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
    logits = logits[0].float().cpu()
    hidden = hidden[0].float().cpu()
    if tuple(logits.shape) != (PROMPT_LEN, VOCAB) or not torch.isfinite(logits).all():
        die(f"{name}: bad reference logits {tuple(logits.shape)}")
    # The logits must be the hidden states times lm_head, or storing only the
    # hidden states would not pin the logits down.
    lm_head = model.lm_head.weight.detach().double().cpu()
    rebuilt = hidden.double() @ lm_head.T
    if float((rebuilt - logits.double()).abs().max()) > 1e-4:
        die(f"{name}: logits are not final hidden @ lm_head^T")
    hidden.numpy().astype("<f4").tofile(os.path.join(out, "hidden_f32.bin"))
    logits[LOGIT_ROWS].numpy().astype("<f4").tofile(os.path.join(out, "logits_rows_f32.bin"))
    greedy_ids, greedy_margins = greedy(model, prompt, TINY_GREEDY, device)
    # The greedy loop's first step must agree with the one-pass logits.
    first, _ = margin_of(logits[-1])
    if first != greedy_ids[0]:
        die(f"{name}: greedy step 0 chose {greedy_ids[0]} but the prefill's argmax is {first}")
    del model

    # bf16 math, for information: how far a bf16 runtime is from f32.
    model = load_model(out, torch.bfloat16, "sdpa", device)
    with torch.no_grad():
        lb = model(input_ids=torch.tensor([prompt], device=device), use_cache=False).logits
    lb = lb[0].float().cpu()
    del model
    rel_l2 = float((lb - logits).norm() / logits.norm())
    max_abs = float((lb - logits).abs().max())

    top = torch.topk(logits, 2, dim=-1).values
    fixture = {
        "name": name,
        "covers": spec["covers"],
        "architecture": config.architectures[0] if config.architectures else spec["config"],
        "made_with": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "seed": SEED + index, "device": str(device)},
        "prompt_ids": prompt,
        "hidden_file": "hidden_f32.bin",
        "hidden_shape": [PROMPT_LEN, HIDDEN],
        "logits_rows_file": "logits_rows_f32.bin",
        "logits_rows": LOGIT_ROWS,
        "logits_shape": [PROMPT_LEN, VOCAB],
        "logits_abs_max": float(logits.abs().max()),
        "logits_std": float(logits.std()),
        "prompt_min_margin": float((top[:, 0] - top[:, 1]).min()),
        "greedy_ids": greedy_ids,
        "greedy_margins": greedy_margins,
        "bf16_logits_rel_l2": rel_l2,
        "bf16_logits_max_abs": max_abs,
    }
    with open(os.path.join(out, "fixture.json"), "w") as f:
        json.dump(fixture, f, indent=1)
    size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    print(f"  {name:13s} {size / 1e6:5.2f} MB  logits std {fixture['logits_std']:.2f} "
          f"max {fixture['logits_abs_max']:.2f}  greedy min margin {min(greedy_margins):.4f}  "
          f"bf16 rel L2 {rel_l2:.2e}  ({time.time() - t:.1f}s)", flush=True)


# ---------------------------------------------------------- embedded model

def read_prompts(shared):
    path = os.path.join(shared, "bench", "prompts-public.jsonl")
    if not os.path.isfile(path):
        die(f"{path} not found (pass --shared, the directory holding bench/prompts-public.jsonl)")
    prompts = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                p = json.loads(line)
                prompts.append((p["id"], p["source"], int(p["target_tokens"]), p["text"]))
            except (ValueError, KeyError) as e:
                die(f"{path}:{lineno}: {e}")
    return prompts


def run_greedy_set(model, prompts, device):
    results = {}
    for pid, ids in prompts:
        results[pid] = greedy(model, ids, EMBEDDED_GREEDY, device)
    return results


def make_embedded(model_dir, shared, out_root, device, limit):
    out = os.path.join(out_root, "embedded")
    os.makedirs(out, exist_ok=True)
    tok, eot = load_tokenizer(model_dir)
    prompts = read_prompts(shared)

    def select(target):
        chosen = [(pid, src, encode(tok, eot, text, pid))
                  for pid, src, tt, text in prompts if tt == target]
        if not chosen:
            die(f"no prompts with target_tokens {target}")
        return chosen[:limit] if limit else chosen

    p2k, p8k = select(2048), select(8192)

    t = time.time()
    model = load_model(model_dir, torch.float32, "eager", device)
    check_loaded_weights(model, model_dir)
    f32 = run_greedy_set(model, [(pid, ids) for pid, _, ids in p2k], device)
    del model
    print(f"  2K f32 greedy: {len(p2k)} prompts ({time.time() - t:.1f}s)", flush=True)

    t = time.time()
    model = load_model(model_dir, torch.bfloat16, "sdpa", device)
    bf16 = run_greedy_set(model, [(pid, ids) for pid, _, ids in p2k], device)
    print(f"  2K bf16 greedy: {len(p2k)} prompts ({time.time() - t:.1f}s)", flush=True)
    t = time.time()
    bf16_8k = run_greedy_set(model, [(pid, ids) for pid, _, ids in p8k], device)
    del model
    print(f"  8K bf16 greedy: {len(p8k)} prompts ({time.time() - t:.1f}s)", flush=True)

    greedy_2k = []
    for pid, src, ids in p2k:
        f_ids, f_m = f32[pid]
        b_ids, b_m = bf16[pid]
        greedy_2k.append({"id": pid, "source": src, "prompt_ids": ids,
                          "f32": {"ids": f_ids, "margins": f_m},
                          "bf16": {"ids": b_ids, "margins": b_m}})
        agree = next((i for i, (a, b) in enumerate(zip(f_ids, b_ids)) if a != b), len(f_ids))
        small = next((i for i, m in enumerate(f_m) if m < 0.005), len(f_m))
        print(f"    {pid:14s} {len(ids):5d} prompt tokens  f32 margin<0.005 first at step "
              f"{small:2d}  bf16 agrees with f32 for {agree:2d} tokens", flush=True)
    greedy_8k = [{"id": pid, "source": src, "prompt_ids": ids,
                  "bf16": {"ids": bf16_8k[pid][0], "margins": bf16_8k[pid][1]}}
                 for pid, src, ids in p8k]
    for fname, data in (("greedy_2k.json", greedy_2k), ("greedy_8k.json", greedy_8k)):
        path = os.path.join(out, fname)
        with open(path, "w") as f:
            json.dump(data, f)
        print(f"  wrote {path} ({os.path.getsize(path) / 1e3:.0f} kB)", flush=True)


def add_f32_8k(model_dir, out_root, device, path=None):
    """Adds f32-math greedy ids and margins to an existing greedy_8k.json.

    The bf16 reference's logits are rounded to bf16 (an ulp of 0.0625 for
    logits in [8, 16)), so a bf16 margin of one ulp is a tie within its own
    rounding; the f32 run tells such steps apart."""
    path = path or os.path.join(out_root, "embedded", "greedy_8k.json")
    with open(path) as f:
        data = json.load(f)
    t = time.time()
    model = load_model(model_dir, torch.float32, "eager", device)
    check_loaded_weights(model, model_dir)
    results = run_greedy_set(model, [(p["id"], p["prompt_ids"]) for p in data], device)
    del model
    for p in data:
        f_ids, f_m = results[p["id"]]
        p["f32"] = {"ids": f_ids, "margins": f_m}
        b_ids = p["bf16"]["ids"]
        agree = next((i for i, (a, b) in enumerate(zip(f_ids, b_ids)) if a != b), len(f_ids))
        print(f"    {p['id']:14s} bf16 agrees with f32 for {agree:2d} tokens", flush=True)
    with open(path, "w") as f:
        json.dump(data, f)
    print(f"  8K f32 greedy: {len(data)} prompts ({time.time() - t:.1f}s), wrote {path}",
          flush=True)


# -------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"),
                    help="fixtures directory (default: tests/fixtures of this checkout)")
    ap.add_argument("--shared", default=None,
                    help="directory holding bench/prompts-public.jsonl (default: ../shared "
                         "or ./shared next to the checkout)")
    ap.add_argument("--model-dir", default=os.path.join(REPO, "models", "vegas-code-22m"),
                    help="the embedded model (default: models/vegas-code-22m)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--skip-embedded", action="store_true",
                    help="only the tiny models (a quick check of this script)")
    ap.add_argument("--limit-prompts", type=int, default=0,
                    help="use only the first N prompts of each size (a quick check only: "
                         "never commit fixtures made with it)")
    ap.add_argument("--add-f32-8k", metavar="GREEDY_8K_JSON", nargs="?", const="",
                    help="only add f32-math ids and margins to an existing greedy_8k.json "
                         "(default: the one under --out)")
    args = ap.parse_args()
    if args.add_f32_8k is not None:
        check_versions()
        add_f32_8k(args.model_dir, args.out, pick_device(args.device), args.add_f32_8k or None)
        return

    check_versions()
    device = pick_device(args.device)
    shared = args.shared
    if shared is None and not args.skip_embedded:
        for cand in (os.path.join(REPO, "..", "shared"), os.path.join(REPO, "shared")):
            if os.path.isfile(os.path.join(cand, "bench", "prompts-public.jsonl")):
                shared = cand
                break
        else:
            die("bench/prompts-public.jsonl not found in ../shared or ./shared; pass --shared")
    print(f"make_fixtures: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"device {device}" + (f" ({torch.cuda.get_device_name(0)})" if device.type == "cuda"
                                else ""), flush=True)
    os.makedirs(args.out, exist_ok=True)
    tok, eot = load_tokenizer(args.model_dir)

    print("tiny models:", flush=True)
    for index, spec in enumerate(TINY_MODELS):
        make_tiny(spec, index, tok, eot, args.model_dir, args.out, device)
    if not args.skip_embedded:
        print("embedded model:", flush=True)
        make_embedded(args.model_dir, shared, args.out, device, args.limit_prompts)
    print(f"make_fixtures: done in {time.time() - T0:.0f}s, fixtures in {args.out}", flush=True)


if __name__ == "__main__":
    main()
