"""vegas.quantize: the embedded model written as a GGUF file (q8_0) and as an FP8 directory
(fp8) loads again through vegas.Model on the CPU, tokenizes as the original, and generates;
a refused output raises vegas.VegasError with the status."""
import pytest

import vegas

PROMPT = "def read_config(path):\n"


@pytest.mark.parametrize("type_, name", [("q8_0", "model-q8_0.gguf"), ("fp8", "model-fp8")])
def test_quantized_model_loads_tokenizes_and_generates(model, model_dir, tmp_path, type_, name):
    out = tmp_path / name
    vegas.quantize(model_dir, out, type_)
    assert out.is_dir() == (type_ == "fp8")
    with vegas.Model(out, backend="cpu") as q:
        assert q.tokenizer.encode(PROMPT) == model.tokenizer.encode(PROMPT)
        with q.session() as s:
            done = s.generate(PROMPT, max_tokens=8, ignore_eos=True)
        assert len(done.tokens) == 8 and done.info.n_generated == 8


def test_fp8_into_a_non_empty_directory_is_an_io_error(model_dir, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(vegas.VegasError) as e:
        vegas.quantize(model_dir, tmp_path, "fp8")
    assert e.value.status == vegas.Status.IO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
