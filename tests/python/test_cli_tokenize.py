"""`vegas tokenize` / `vegas detokenize` agree with the tokenizer API and report
errors as `vegas: <STATUS>: <message>` with a non-zero exit."""
import json
import os
import subprocess

import pytest

CLI = os.environ.get("VEGAS_CLI")
MODEL_DIR = os.environ.get("VEGAS_MODEL_DIR")
pytestmark = pytest.mark.skipif(not CLI or not os.path.exists(CLI) or not MODEL_DIR,
                                reason="VEGAS_CLI or VEGAS_MODEL_DIR is not set")

TEXT = "def f(x):\n    return x  # é 你好<|endoftext|>"


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, timeout=60)


def test_tokenize_json_matches_hf():
    """--json prints the ids HF's tokenizer gives, special tokens parsed."""
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    r = run("tokenize", "--model", MODEL_DIR, "--text", TEXT, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ids": hf.encode(TEXT).ids}


def test_tokenize_plain_file_and_no_special(tmp_path):
    """--file reads the text; --no-special keeps <|endoftext|> as plain text."""
    f = tmp_path / "in.txt"
    f.write_bytes(TEXT.encode())
    plain = run("tokenize", "--model", MODEL_DIR, "--file", str(f))
    ids = [int(x) for x in plain.stdout.split()]
    assert ids[-1] == 0
    nospecial = run("tokenize", "--model", MODEL_DIR, "--file", str(f), "--no-special")
    assert 0 not in [int(x) for x in nospecial.stdout.split()]


def test_detokenize_round_trip():
    """detokenize prints the text back (plus a newline)."""
    ids = json.loads(run("tokenize", "--model", MODEL_DIR, "--text", TEXT, "--json").stdout)["ids"]
    r = run("detokenize", "--model", MODEL_DIR, "--ids", ",".join(map(str, ids)))
    assert r.returncode == 0
    assert r.stdout.decode() == TEXT + "\n"


def test_errors_are_reported():
    """Bad ids and a missing model give the status name and a non-zero exit."""
    r = run("detokenize", "--model", MODEL_DIR, "--ids", "1,99999999")
    assert r.returncode != 0
    assert r.stderr.decode().startswith("vegas: VEGAS_ERR_TOKEN_OUT_OF_RANGE: ")
    r = run("tokenize", "--model", "/nonexistent/model", "--text", "x")
    assert r.returncode != 0
    assert r.stderr.decode().startswith("vegas: VEGAS_ERR_IO: ")


def test_detokenize_json_pieces_and_stdin():
    """detokenize --json gives the text, the ids and each id's piece; ids may be
    separated by spaces (as tokenize prints them) and read from standard input."""
    plain = run("tokenize", "--model", MODEL_DIR, "--text", TEXT).stdout.decode().strip()
    ids = [int(x) for x in plain.split()]
    r = subprocess.run([CLI, "detokenize", "--model", MODEL_DIR, "--ids", "-", "--json"],
                       input=plain.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["text"] == TEXT and j["ids"] == ids
    assert len(j["pieces"]) == len(ids)
    # The ASCII pieces join to the text; byte-level tokens holding part of a
    # character (é, 你好) are shown as U+FFFD.
    joined = "".join(j["pieces"])
    assert joined.startswith("def f(x):\n    return x  # ") and joined.endswith("<|endoftext|>")
    assert "\ufffd" in joined


def test_tokenize_and_generate_read_standard_input():
    """--file - and --prompt-file - read standard input."""
    r = subprocess.run([CLI, "tokenize", "--model", MODEL_DIR, "--file", "-", "--json"],
                       input=TEXT.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    direct = run("tokenize", "--model", MODEL_DIR, "--text", TEXT, "--json")
    assert json.loads(r.stdout) == json.loads(direct.stdout)
    r = subprocess.run([CLI, "generate", "--model", MODEL_DIR, "--backend", "cpu", "--prompt-file", "-",
                        "--max-tokens", "3", "--temperature", "0", "--json"],
                       input=b"def add(a, b):\n", capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stats"]["prompt_tokens"] == len(
        json.loads(run("tokenize", "--model", MODEL_DIR, "--text", "def add(a, b):\n", "--json").stdout)["ids"])
