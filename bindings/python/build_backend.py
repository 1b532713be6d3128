"""The package's PEP 517 / PEP 660 build backend: it needs nothing but the standard library,
so `pip install ./bindings/python` works offline, build isolation and all (with setuptools'
backend pip first had to download setuptools, or needed `wheel` besides it). The package is
pure Python: a wheel is its files, the project metadata and a RECORD, in a zip.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _project_field(key):
    """A string field of pyproject.toml's [project] table (the one place it is written)."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return re.search(r'^%s\s*=\s*"([^"]*)"' % key, project, re.M).group(1)


NAME = _project_field("name")
VERSION = _project_field("version")
SUMMARY = _project_field("description")
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
WHEEL_TAG = "py3-none-any"
# Files of the package besides its modules: the typing marker and a libvegas copied in.
DATA_SUFFIXES = (".py", "py.typed", ".dylib", ".dll")


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.8\nLicense: see the libvegas repository\n"
            "Provides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _package_files():
    """(path in the archive, path on disk) of every file the package ships."""
    root = os.path.join(HERE, NAME)
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        shipped = name.endswith(DATA_SUFFIXES) or name.startswith("libvegas.so")
        if os.path.isfile(path) and shipped:
            out.append((f"{NAME}/{name}", path))
    return out


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}\n"


def _write_wheel(directory, files):
    """files: [(arcname, bytes)]; adds the dist-info and returns the wheel's name."""
    files = files + [
        (f"{DIST_INFO}/METADATA", _metadata().encode()),
        (f"{DIST_INFO}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: {NAME} build_backend\n"
                                f"Root-Is-Purelib: true\nTag: {WHEEL_TAG}\n").encode()),
        (f"{DIST_INFO}/top_level.txt", f"{NAME}\n".encode()),
    ]
    record = "".join(_record_line(a, d) for a, d in files) + f"{DIST_INFO}/RECORD,,\n"
    name = f"{NAME}-{VERSION}-{WHEEL_TAG}.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files + [(f"{DIST_INFO}/RECORD", record.encode())]:
            z.writestr(arcname, data)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(a, _read(p)) for a, p in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding only a .pth that puts this folder on sys.path (PEP 660)."""
    return _write_wheel(wheel_directory, [(f"_{NAME}_editable.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        def add(arcname, data):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("PKG-INFO", _metadata().encode())
        for arcname in ("pyproject.toml", "build_backend.py", "README.md"):
            add(arcname, _read(os.path.join(HERE, arcname)))
        for arcname, path in _package_files():
            add(arcname, _read(path))
    return name
