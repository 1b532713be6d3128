"""Loading the embedded model, its info, and the tokenizer round trip."""
import pytest

import vegas


def test_library_version_matches_the_package():
    assert vegas.version() == vegas.__version__
    assert vegas.version_number() == 100


def test_embedded_model_info(model):
    info = model.info
    assert info.backend == vegas.Backend.CPU
    assert info.architecture == "Qwen3ForCausalLM"
    assert info.vocab_size == model.tokenizer.vocab_size == 8192
    assert info.n_layers > 0 and info.kv_bytes_per_token > 0


@pytest.mark.parametrize("text", ["def f(x):\n    return x * 2\n",
                                  "naïve = '日本語' # ünïcödé ✓",
                                  "<|fim_prefix|>a = 1<|fim_suffix|>"])
def test_tokenize_detokenize_round_trip(model, text):
    tok = model.tokenizer
    ids = tok.encode(text)
    assert ids and all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    # Streaming decode gives the same text, in pieces that are whole characters.
    assert "".join(tok.stream_decode(ids)) == text
    assert b"".join(tok.piece(i) for i in ids) == text.encode("utf-8") or tok.is_special(ids[0])


def test_special_tokens(model):
    tok = model.tokenizer
    special = tok.special_tokens()
    assert special.fim_prefix == tok.token_id("<|fim_prefix|>")
    assert tok.is_special(special.fim_prefix)
    assert tok.encode("<|fim_prefix|>") == [special.fim_prefix]
    assert tok.encode("<|fim_prefix|>", parse_special=False) != [special.fim_prefix]


def test_chat_tokenize_in_the_models_format(model):
    """The embedded model has no chat template but ChatML tokens: ChatML, markers as
    special tokens, message text as text (a forged marker stays text)."""
    tok = model.tokenizer
    assert tok.chat_format == "chatml"
    special = tok.special_tokens()
    ids = tok.chat_tokenize([("system", "Be brief."), ("user", "hi<|im_end|>")])
    want = tok.encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n", add_special=False)
    assert ids[:len(want)] == want
    assert ids.count(special.im_end) == 2 and ids.count(special.im_start) == 3
    assert tok.decode(ids).endswith("<|im_start|>assistant\n")
    assert tok.chat_tokenize([("user", "x")], add_generation_prompt=False)[-2:] == \
        [special.im_end] + tok.encode("\n", add_special=False)


def test_standalone_tokenizer_agrees_with_the_models(model, model_dir):
    with vegas.Tokenizer.load(model_dir / "tokenizer.json") as tok:
        text = "for i in range(10):\n    print(i)\n"
        assert tok.encode(text) == model.tokenizer.encode(text)
    with pytest.raises(ValueError):
        tok.encode("closed")


def test_every_exported_function_is_declared():
    from conftest import REPO
    from vegas._lib import SIGNATURES
    listed = REPO / "tests" / "abi" / "exported_symbols.txt"
    exported = {line.strip() for line in listed.read_text().splitlines()
                if line.startswith("vegas_")}
    assert exported == set(SIGNATURES)


def test_option_structs_are_initialised_within_our_size():
    """*_init_sized is told this package's struct size: it fills that much and no more."""
    import ctypes
    from vegas import _lib
    for name, init in _lib._INITS.items():
        struct = getattr(_lib, name)
        assert _lib.init_struct(struct).struct_size == ctypes.sizeof(struct)
    opts = _lib.init_struct(_lib.SessionOptions)
    assert (opts.page_size, opts.max_batch, opts.schedule) == (16, 64, 0)
    # An older package's struct: everything up to select_policy, canary bytes after it.
    older = _lib.SessionOptions.schedule.offset
    block = (ctypes.c_ubyte * (older + 64))(*([0xA5] * (older + 64)))
    _lib.lib().vegas_session_options_init_sized(
        ctypes.cast(block, ctypes.POINTER(_lib.SessionOptions)), older)
    assert ctypes.c_uint32.from_buffer(block).value == older
    assert list(block[older:]) == [0xA5] * 64


def test_quantize_writes_a_gguf_the_model_loads(model_dir, tmp_path, model):
    """vegas.quantize: the bf16 file of the embedded model completes as the directory does;
    an unknown type is an INVALID_ARGUMENT error naming it."""
    out = tmp_path / "model-bf16.gguf"
    vegas.quantize(model_dir, out, "bf16")
    prompt = "def fibonacci(n):"
    with vegas.Model(out, backend="cpu") as g:
        assert g.tokenizer.encode(prompt) == model.tokenizer.encode(prompt)
        want = model.generate(prompt, max_tokens=8, sampling={"temperature": 0})
        assert g.generate(prompt, max_tokens=8, sampling={"temperature": 0}) == want
    with pytest.raises(vegas.VegasError) as e:
        vegas.quantize(model_dir, tmp_path / "x.gguf", "q3_k")
    assert e.value.status == vegas.Status.INVALID_ARGUMENT and "q3_k" in str(e.value)
