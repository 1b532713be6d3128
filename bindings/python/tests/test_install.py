"""Installing the package without a network: pip builds the wheel (and an sdist's wheel)
with the in-tree backend, build isolation on, `--no-index` so nothing can be downloaded.
What it proves: the installed package imports outside the source tree and reports the
project's version, the wheel's RECORD matches its files, and an editable install points
at the sources."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]


def pip(*args):
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    env.pop("PYTHONPATH", None)  # the installed copy, not the sources
    return subprocess.run([sys.executable, "-m", "pip", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def imported_version(target):
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c",
                          "import vegas, os; print(vegas.__version__, os.path.dirname(vegas.__file__))"],
                         env=env, capture_output=True, text=True, timeout=60, cwd=target)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def in_tree_backend():
    """The package's build backend module, imported from the source folder."""
    sys.path.insert(0, str(PACKAGE))
    try:
        import build_backend
    finally:
        sys.path.pop(0)
    return build_backend


@pytest.fixture(scope="module")
def has_pip():
    if pip("--version").returncode != 0:
        pytest.skip("no pip for this interpreter")


def test_offline_install_imports(tmp_path, has_pip):
    target = tmp_path / "site"
    r = pip("install", "-q", "--target", str(target), str(PACKAGE))
    assert r.returncode == 0, r.stdout + r.stderr
    version, where = imported_version(target)
    assert version == "0.1.0" and Path(where) == target / "vegas"
    assert (target / "vegas" / "py.typed").exists()


def test_wheel_record_and_sdist(tmp_path, has_pip):
    build_backend = in_tree_backend()
    wheel = tmp_path / build_backend.build_wheel(str(tmp_path))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        record = z.read("vegas-0.1.0.dist-info/RECORD").decode().splitlines()
    assert {line.split(",")[0] for line in record} == names
    assert "vegas/__init__.py" in names and "vegas/tokenizer.py" in names
    sdist = tmp_path / build_backend.build_sdist(str(tmp_path))
    target = tmp_path / "from-sdist"
    r = pip("install", "-q", "--target", str(target), str(sdist))
    assert r.returncode == 0, r.stdout + r.stderr
    assert imported_version(target)[0] == "0.1.0"


def test_editable_wheel_points_at_the_sources(tmp_path):
    build_backend = in_tree_backend()
    wheel = tmp_path / build_backend.build_editable(str(tmp_path))
    with zipfile.ZipFile(wheel) as z:
        assert z.read("_vegas_editable.pth").decode().strip() == str(PACKAGE)
