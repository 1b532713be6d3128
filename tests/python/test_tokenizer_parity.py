"""Token-id and text parity of libvegas's tokenizer with the Hugging Face
`tokenizers` package, over the public benchmark prompts and a generated stress
set, for the embedded model's tokenizer and two tokenizers trained here
(Llama-3-style Split + ByteLevel, GPT-2-style ByteLevel with its own regex).
"""
import json
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import vegas_ctypes  # noqa: E402

# Load libvegas before `tokenizers` (see vegas_ctypes.load for why the order matters).
LIB = vegas_ctypes.load()
tokenizers = pytest.importorskip("tokenizers")

MODEL_DIR = os.environ.get("VEGAS_MODEL_DIR")
SHARED_DIR = os.environ.get("VEGAS_SHARED_DIR")
pytestmark = pytest.mark.skipif(LIB is None, reason="VEGAS_LIB is not set")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def public_prompts():
    if not SHARED_DIR:
        return []
    path = os.path.join(SHARED_DIR, "bench", "prompts-public.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def random_unicode(rng, n):
    """Characters from everywhere in Unicode except surrogates, weighted to ASCII."""
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.4:
            cp = rng.randint(0x20, 0x7E)
        elif r < 0.5:
            cp = rng.choice([0x09, 0x0A, 0x0D, 0x20, 0xA0, 0x3000, 0x2028, 0x85, 0x0B, 0x0C])
        elif r < 0.8:
            cp = rng.randint(0x80, 0xFFFF)
        else:
            cp = rng.randint(0x10000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        out.append(chr(cp))
    return "".join(out)


def stress_strings(specials):
    """A fixed-seed stress set of a few thousand strings."""
    rng = random.Random(20240611)
    fixed = [
        "", "a", " ", "\n", "\t", "é", "\u00a0", "0", "'", "你", "👍", "\r\n",
        "DON'T I'M YOU'LL HE'D WE'RE THEY'VE IT'S", "don't i'm you'll", "DoN'T i'M",
        "e\u0301 a\u0308 o\u0302\u0323 \u1e0b\u0323 Å vs A\u030a", "ﬁ ﬀ Ǆ ½ ①",
        "中文分词测试，包括标点。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
        "👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 ❤️ 🇯🇵🇺🇸 1️⃣",
        "שלום עולם مرحبا بالعالم سلام دنیا", "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ ๐๑๒๓ ０１２３",
        "col1\tcol2\t\tcol3\r\nline2\r\n\r\n", " " * 100 + "x", "\n" * 50, "\t \n \r\n " * 20,
        "x" + " " * 257 + "y", "    def f(x):\n        return x  # comment\n",
        "a=1;b=2;c=a+b", "https://example.com/path?q=1&r=2#frag", "1234567890123",
        "3.14159 -2.5e-10 0x1F 1_000_000", "αβγ ΑΒΓ ЖЗИ жзи", "\u200b\u200d\u2060\ufeff",
        "\x00\x01\x1f\x7f", "Ｈｅｌｌｏ　Ｗｏｒｌｄ", "ǅ ǈ ǋ ǲ", "İstanbul ıi ß ẞ",
    ]
    for s in specials:
        fixed += [s, "x" + s + "y", " " + s + " ", s + s, "a " + s + "\nb", s[:-1], s + "\u0301"]
    words = ["the", "The", "THE", "don't", "I'M", "hello", "world", "def", "return", "  ",
             "\n", "\t", "123", "4567", "你好", "مرحبا", "e\u0301", "👍🏽", ".", "...", "!?",
             "'s", "'LL", "_x", "x_", "-", "—", "’", "\r\n"] + specials
    out = list(fixed)
    for _ in range(1500):
        out.append("".join(rng.choice(words) + rng.choice(["", " ", "  ", "\n"])
                           for _ in range(rng.randint(1, 12))))
    for _ in range(1500):
        out.append(random_unicode(rng, rng.randint(1, 40)))
    for _ in range(300 if specials else 0):
        out.append(random_unicode(rng, 4) + rng.choice(specials) + random_unicode(rng, 4))
    return out


def invalid_utf8_inputs():
    rng = random.Random(99)
    fixed = [b"\xff", b"a\x80b", b"\xc3", b"\xe4\xb8", b"\xe4\xb8a", b"\xf0\x9f\x98", b"\xed\xa0\x80",
             b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe0\x80\x80",
             b"ok \xe2\x82 \xe2\x82\xac"]
    out = list(fixed)
    alphabet = [b"a", b" ", b"\n", b"\xc3\xa9", b"\xe4\xbd\xa0", b"\xf0\x9f\x91\x8d"]
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append(bytes([rng.randint(0x80, 0xFF)]) if rng.random() < 0.4
                         else rng.choice(alphabet))
        out.append(b"".join(parts))
    return out


def check_encode_parity(ours, hf, texts, label):
    mismatches = []
    for text in texts:
        expected = hf.encode(text).ids
        got = ours.encode(text)
        if got != expected:
            mismatches.append((text, got, expected))
    assert not mismatches, f"{label}: {len(mismatches)} of {len(texts)} differ, first: " + \
        repr(mismatches[0])[:600]


def check_decode_parity(ours, hf, ids_list, label):
    for ids in ids_list:
        for skip in (False, True):
            expected = hf.decode(ids, skip_special_tokens=skip)
            got = ours.decode(ids, skip_special=skip)
            assert got == expected, f"{label}: decode({ids[:20]}..., skip={skip})"


def random_id_sequences(vocab_size, count, seed):
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(rng.randint(1, 24))] for _ in range(count)]


def added_contents(hf):
    return sorted(t.content for t in hf.get_added_tokens_decoder().values())


def run_parity_suite(ours, hf, label):
    specials = added_contents(hf)
    texts = public_prompts() + stress_strings(specials)
    # Ids, special tokens parsed (the default).
    check_encode_parity(ours, hf, texts, label)
    # Special tokens left as text: HF's encode_special_tokens.
    hf.encode_special_tokens = True
    try:
        for text in texts[:800]:
            assert ours.encode(text, parse_special=False) == hf.encode(text).ids, (label, text)
    finally:
        hf.encode_special_tokens = False
    # Invalid UTF-8: HF sees what Python's errors='replace' decode makes of it.
    for raw in invalid_utf8_inputs():
        assert ours.encode(raw) == hf.encode(raw.decode("utf-8", "replace")).ids, (label, raw)
    # Decoding our own ids gives HF's text (round trip through both).
    check_decode_parity(ours, hf, [hf.encode(t).ids for t in texts[:1500]], label)
    # Random id sequences: split multi-byte characters give U+FFFD exactly as HF.
    check_decode_parity(ours, hf, random_id_sequences(hf.get_vocab_size(), 2000, 7), label)
    # The streaming detokenizer's chunks add up to decode(), each chunk whole UTF-8.
    for ids in random_id_sequences(hf.get_vocab_size(), 300, 8):
        chunks = ours.stream_decode(ids)
        for c in chunks:
            c.decode("utf-8")  # raises on an incomplete character
        assert b"".join(chunks) == ours.decode_bytes(ids), (label, ids)


@pytest.fixture(scope="module")
def model_tokenizer():
    if not MODEL_DIR or not os.path.exists(os.path.join(MODEL_DIR, "tokenizer.json")):
        pytest.skip("VEGAS_MODEL_DIR is not set")
    return (vegas_ctypes.Tokenizer(LIB, MODEL_DIR),
            tokenizers.Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json")))


def test_model_tokenizer_parity(model_tokenizer):
    """The embedded model's tokenizer (Qwen2 pre-tokenizer, NFC) matches HF everywhere."""
    ours, hf = model_tokenizer
    assert ours.vocab_size == hf.get_vocab_size()
    run_parity_suite(ours, hf, "model")


def test_prompts_endoftext_is_one_token(model_tokenizer):
    """Every <|endoftext|> in the public prompts becomes the single eos id."""
    ours, _ = model_tokenizer
    eos = ours.token_id("<|endoftext|>")
    prompts = [p for p in public_prompts() if "<|endoftext|>" in p]
    if not prompts:
        pytest.skip("no public prompt holds <|endoftext|>")
    for p in prompts:
        assert ours.encode(p).count(eos) == p.count("<|endoftext|>")


def test_model_special_tokens(model_tokenizer):
    """Well-known ids come from tokenizer_config.json and the usual token names."""
    ours, hf = model_tokenizer
    s = ours.special_tokens()
    for key, name in [("fim_prefix", "<|fim_prefix|>"), ("fim_middle", "<|fim_middle|>"),
                      ("fim_suffix", "<|fim_suffix|>"), ("file_sep", "<|file_sep|>"),
                      ("im_start", "<|im_start|>"), ("im_end", "<|im_end|>"),
                      ("eos", "<|endoftext|>")]:
        assert s[key] == hf.token_to_id(name), key
        assert ours.is_special(s[key])
    assert s["bos"] == -1  # tokenizer_config.json says bos_token: null


def _train(tmp_path, name, pre_tokenizer, normalizer, post_processor, added, specials,
           string_merges):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    corpus = public_prompts() or ["def f(x):\n    return x\n"]
    corpus = corpus + stress_strings([])[:400]
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens(added)
    if post_processor is not None:
        tok.post_processor = post_processor
    path = tmp_path / name
    path.mkdir()
    tok.save(str(path / "tokenizer.json"))
    data = json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    is_pairs = bool(merges) and isinstance(merges[0], list)
    # Exercise both merges forms: rewrite to the one the library did not write.
    if string_merges and is_pairs:
        data["model"]["merges"] = [" ".join(m) for m in merges]
    elif not string_merges and not is_pairs:
        data["model"]["merges"] = [m.split(" ") for m in merges]
    (path / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path, Tokenizer.from_file(str(path / "tokenizer.json"))


def test_llama3_style_parity(tmp_path):
    """Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=False), TemplateProcessing bos,
    merges as [a, b] pairs, special and non-special added tokens (lstrip/rstrip/single_word)."""
    from tokenizers import AddedToken, Regex, pre_tokenizers, processors
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>",
                "<|fim_suffix|>"]
    added = [AddedToken("<think>", special=False, normalized=False),
             AddedToken("</think>", special=False, normalized=False, lstrip=True, rstrip=True),
             AddedToken("[MASK]", special=False, normalized=False, single_word=True),
             AddedToken("<|reserved_0|>", special=True, normalized=False)]
    post = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                         special_tokens=[("<|begin_of_text|>", 0)])
    path, hf = _train(tmp_path, "llama3", pre, None, post, added, specials, string_merges=False)
    ours = vegas_ctypes.Tokenizer(LIB, path)
    run_parity_suite(ours, hf, "llama3")
    assert ours.encode("hi")[0] == 0 and ours.encode("hi", add_special=False)[0] != 0
    assert ours.special_tokens()["bos"] == 0


def test_gpt2_style_parity(tmp_path):
    """ByteLevel(use_regex=True, add_prefix_space=True) with the GPT-2 regex, NFC,
    merges as "a b" strings, normalized added tokens."""
    from tokenizers import AddedToken, normalizers, pre_tokenizers, processors
    pre = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = [AddedToken("<code>", special=False, normalized=True),
             AddedToken("café", special=False, normalized=True),
             AddedToken(" TODO", special=False, normalized=False),
             AddedToken("[X]", special=False, normalized=True, single_word=True, lstrip=True)]
    path, hf = _train(tmp_path, "gpt2", pre, normalizers.NFC(),
                      processors.ByteLevel(trim_offsets=False), added, specials,
                      string_merges=True)
    ours = vegas_ctypes.Tokenizer(LIB, path)
    run_parity_suite(ours, hf, "gpt2")


@pytest.mark.parametrize("behavior", ["removed", "isolated", "merged_with_previous",
                                      "merged_with_next", "contiguous"])
def test_split_behaviors_parity(tmp_path, model_tokenizer, behavior):
    """Every Split behaviour, inverted or not, with a regex and a literal pattern, matches HF."""
    from tokenizers import Regex, pre_tokenizers
    texts = ["a, b,, c ,d", "  x  y ", ",,,", "hello world, foo-bar", "", "no delims", ", a , ",
             "x , é ,, 你好 ,"]
    for invert in (False, True):
        for pattern in (Regex(r"\s*,\s*"), " "):
            hf = tokenizers.Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
            hf.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(pattern, behavior=behavior, invert=invert),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            path = tmp_path / f"split-{invert}-{isinstance(pattern, str)}.json"
            hf.save(str(path))
            ours = vegas_ctypes.Tokenizer(LIB, path)
            for text in texts:
                assert ours.encode(text) == hf.encode(text).ids, (behavior, invert, text)
