"""kernels/base/isa.py: which levels a CPU supports (fake feature dicts), what forcing a level does, and the refusal of
a level this CPU lacks (a ValueError naming the missing features, never a crash at run time)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import isa_params
from lite_numba.kernels.base import isa

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder

X86_V3 = {f: True for f in ("avx", "avx2", "fma", "bmi", "bmi2", "f16c", "lzcnt", "movbe")}
ZEN4 = {**X86_V3, **{f: True for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni")}}
ALDER_LAKE = {**X86_V3, "avxvnni": True, "avx512f": False}
OLD_X86 = {"sse4.2": True, "avx": True}
ARM = {"neon": True, "dotprod": True}


@pytest.fixture
def fresh_level(monkeypatch):
    """isa_level() caches its answer per LITE_NUMBA_ISA value; clear it around the test."""
    isa._level_for.cache_clear()
    yield
    isa._level_for.cache_clear()


def test_supported_levels_of_fake_cpus():
    assert isa.supported_levels(OLD_X86) == ("portable",)
    assert isa.supported_levels(X86_V3) == ("portable", "avx2")
    assert isa.supported_levels(ALDER_LAKE) == ("portable", "avx2", "avxvnni")
    assert isa.supported_levels(ZEN4) == ("portable", "avx2", "avx512", "avx512vnni")
    assert isa.supported_levels(ARM) == ("portable", "neon", "neon-dotprod")
    assert isa.best_level(ALDER_LAKE) == "avxvnni" and isa.best_level(ZEN4) == "avx512vnni"
    assert isa.best_level({}) == "portable"


def test_missing_features_name_what_is_lacking():
    assert isa.missing_features("avx512", ALDER_LAKE) == ("avx512f", "avx512bw", "avx512vl", "avx512dq")
    assert isa.missing_features("avxvnni", ZEN4) == ("avxvnni",)
    assert isa.missing_features("neon-dotprod", {"neon": True}) == ("dotprod",)
    assert isa.missing_features("portable", {}) == ()
    assert not isa.supports("avx2", {**X86_V3, "fma": False})  # one missing feature is enough
    for level in isa.LEVELS:  # every level's needs are spelled out
        assert level in isa.NEEDS
        assert isa.supports(level, {f: True for f in isa.NEEDS[level]})


def test_has_is_inclusion_not_a_ladder(monkeypatch, fresh_level):
    monkeypatch.setattr(isa, "cpu_features", lambda: {**ZEN4, "avxvnni": True})
    monkeypatch.setenv("LITE_NUMBA_ISA", "avx512vnni")
    assert isa.has("avx2") and isa.has("avx512") and not isa.has("avxvnni")
    monkeypatch.setenv("LITE_NUMBA_ISA", "avxvnni")
    assert isa.has("avx2") and not isa.has("avx512")
    monkeypatch.setenv("LITE_NUMBA_ISA", "portable")
    assert not isa.has("avx2") and isa.has("portable")


def test_forcing_an_unsupported_level_of_a_fake_cpu_is_refused(monkeypatch, fresh_level):
    monkeypatch.setattr(isa, "cpu_features", lambda: dict(ALDER_LAKE))
    monkeypatch.setenv("LITE_NUMBA_ISA", "avx512vnni")
    with pytest.raises(ValueError, match="lacks avx512f, avx512bw, avx512vl, avx512dq, avx512vnni"):
        isa.isa_level()
    monkeypatch.setenv("LITE_NUMBA_ISA", "sse9")
    with pytest.raises(ValueError, match="expected one of"):
        isa.isa_level()
    monkeypatch.setenv("LITE_NUMBA_ISA", "AVX2")  # case-insensitive
    assert isa.isa_level() == "avx2"
    monkeypatch.delenv("LITE_NUMBA_ISA")
    assert isa.isa_level() == "avxvnni"


def test_numba_cpu_features_is_respected(monkeypatch):
    isa.cpu_features.cache_clear()
    try:
        monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx,+avx2,+fma,+bmi,+bmi2,+f16c,+lzcnt,+movbe,-avx512f")
        assert isa.supported_levels() == ("portable", "avx2")
    finally:
        monkeypatch.delenv("NUMBA_CPU_FEATURES")
        isa.cpu_features.cache_clear()


def _tiny_model() -> bytes:
    """A FULLY_CONNECTED (whose prepare asks the ISA level) with a RELU: y = relu(x @ I)."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4])
    y = b.add_tensor("y", np.float32, [1, 4])
    b.add_op("FULLY_CONNECTED", [x, b.add_const("w", np.eye(4, dtype=np.float32)), -1], [y],
             options={"fused_activation_function": "RELU"})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("level", [p.values[0] for p in isa_params()])
def test_forcing_a_level_on_this_cpu(level, monkeypatch, fresh_level):
    """Every supported level runs a model; every unsupported one is refused with the missing features named."""
    monkeypatch.setenv("LITE_NUMBA_ISA", level)
    if isa.supports(level):
        it = Interpreter(model_content=_tiny_model())
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.array([[-1, 0, 2, -3]], np.float32))
        it.invoke()
        assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [[0, 0, 2, 0]]
        assert isa.isa_level() == level
    else:  # the missing features, or (amx) the refused tile state
        with pytest.raises(ValueError, match=re.escape(isa.unavailable(level))):
            it = Interpreter(model_content=_tiny_model())
            it.allocate_tensors()
