"""Shared fixtures: where the bundled models live, and the official runtime (the oracle)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
MODELS = DATA / "models"
# The development machines and CI have the team's shared folder beside the repository (with the large models).
SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


def model_path(name: str) -> Path:
    """A bundled model, or one from ../shared/models (skips when neither exists)."""
    for folder in (MODELS, SHARED_MODELS):
        p = folder / f"{name}.tflite"
        if p.exists():
            return p
    pytest.skip(f"model {name} is not bundled and ../shared/models is absent")


@pytest.fixture(scope="session")
def official():
    """The ai_edge_litert.interpreter module; fails (not skips) under CI when it is missing."""
    from lite_numba.testing import require_official

    return require_official()


def pytest_report_header(config):
    return f"lite-numba models: {MODELS} (+ {SHARED_MODELS if SHARED_MODELS.exists() else 'no shared models'}); " \
           f"CI={os.environ.get('CI', '')}"
