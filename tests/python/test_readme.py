"""The README's examples run as written: its C program compiles against the built library
and completes a prompt, and each line of its CLI block runs with only `build/bin/vegas`
replaced by the binary under test (and `../shared` by the shared folder). What it proves:
an example that drifts from the library or the CLI (a renamed option, a changed JSON
field, a wrong pipe) fails here, not in a new user's terminal."""
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

CLI = os.environ.get("VEGAS_CLI")
LIB = os.environ.get("VEGAS_LIB")
SOURCE = Path(os.environ.get("VEGAS_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SHARED = os.environ.get("VEGAS_SHARED_DIR", str(SOURCE.parent / "shared"))
pytestmark = pytest.mark.skipif(not CLI or not LIB, reason="VEGAS_CLI / VEGAS_LIB not set")
# Lines of the CLI block left out: benchmarks and tuning take minutes on 2 cores.
SLOW = ("vegas bench", "vegas tune")


def code_blocks(lang):
    text = (SOURCE / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```%s\n(.*?)^```" % lang, text, re.S | re.M)


def test_the_c_program_compiles_and_completes(tmp_path):
    (program,) = [b for b in code_blocks("c") if "int main" in b]
    (tmp_path / "demo.c").write_text(program, encoding="utf-8")
    lib_dir = str(Path(LIB).parent)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "demo.c", "-I", str(SOURCE / "include"),
                    "-L", lib_dir, "-Wl,-rpath," + lib_dir, "-lvegas", "-o", "demo"],
                   cwd=tmp_path, check=True, timeout=120)
    # The program loads models/vegas-code-22m relative to where it runs: the repository.
    out = subprocess.run([str(tmp_path / "demo")], cwd=SOURCE, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout) > 0


def cli_lines():
    (block,) = [b for b in code_blocks("sh") if "build/bin/vegas generate" in b]
    return [l for l in block.splitlines() if l.startswith(("build/bin/vegas", "printf"))]


def test_the_cli_examples_run(tmp_path):
    (tmp_path / "f.py").write_text("def quicksort(xs):\n", encoding="utf-8")
    ran = 0
    for line in cli_lines():
        if any(s in line for s in SLOW):
            continue
        command = line.split("  #")[0].strip()  # the comment after the command
        command = command.replace("build/bin/vegas", shlex.quote(CLI)).replace("../shared", SHARED)
        out = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (line, out.stderr)
        assert out.stdout, line
        if "--json" in command and "|" not in command.split("--json")[-1]:
            json.loads(out.stdout)  # what the comment promises is JSON
        if "detokenize" in command:
            assert json.loads(out.stdout)["text"] == "def f(x):"
        ran += 1
    assert ran >= 4
