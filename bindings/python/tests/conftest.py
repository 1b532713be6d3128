"""Fixtures of the binding tests: the embedded model (VEGAS_MODEL_DIR, else the
repository's models/vegas-code-22m), loaded once on the CPU backend."""
import os
from pathlib import Path

import pytest

import vegas

REPO = Path(__file__).resolve().parents[3]
MODEL_DIR = Path(os.environ.get("VEGAS_MODEL_DIR", REPO / "models" / "vegas-code-22m"))


@pytest.fixture(scope="session")
def model_dir() -> Path:
    return MODEL_DIR


@pytest.fixture(scope="session")
def model():
    with vegas.Model(MODEL_DIR, backend="cpu") as m:
        yield m
