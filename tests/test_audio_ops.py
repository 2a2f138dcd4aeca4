"""AudioSpectrogram and Mfcc (kernels/signal/audio.py; custom ops the official builtin resolver registers) against the
official runtime. Both compute in double and round to float32 at the end; our FFT is another double FFT than the
official Ooura rdft, so spectrogram values agree to float32 rounding (1e-5 relative to the largest value)."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_official, run_ours

require_official()


def _frames(samples, window, stride):
    return 0 if samples < window else 1 + (samples - window) // stride


def _spectrogram_model(samples, channels, window, stride, squared) -> bytes:
    b = ModelBuilder()
    x = b.add_input("audio", np.float32, [samples, channels])
    bins = (1 << (window - 1).bit_length()) // 2 + 1
    y = b.add_tensor("spectrogram", np.float32, [channels, _frames(samples, window, stride), bins])
    b.add_custom_op("AudioSpectrogram", [x], [y],
                    options={"window_size": window, "stride": stride, "magnitude_squared": squared})
    b.mark_output(y)
    return b.build()


def _mfcc_model(shape, rate, upper, lower, channels, coefficients, rate_input=False) -> bytes:
    b = ModelBuilder()
    x = b.add_input("spectrogram", np.float32, list(shape))
    r = b.add_input("rate", np.int32, [1]) if rate_input else b.add_const("rate", np.array([rate], np.int32))
    y = b.add_tensor("mfcc", np.float32, [shape[0], shape[1], coefficients])
    b.add_custom_op("Mfcc", [x, r], [y], options={
        "upper_frequency_limit": upper, "lower_frequency_limit": lower,
        "filterbank_channel_count": channels, "dct_coefficient_count": coefficients})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("samples,channels,window,stride,squared", [
    (1000, 1, 256, 128, True), (1000, 2, 200, 77, False), (480, 1, 480, 160, False), (100, 3, 7, 3, True),
    (300, 1, 2, 1, False), (50, 1, 64, 32, True),  # window 2 (the smallest); input shorter than a window
])
def test_audio_spectrogram(samples, channels, window, stride, squared):
    rng = np.random.default_rng(samples + window)
    x = rng.standard_normal((samples, channels)).astype(np.float32)
    x[:, 0] += np.sin(np.arange(samples) * 0.3).astype(np.float32) * 3
    model = _spectrogram_model(samples, channels, window, stride, squared)
    ref, got = run_official(model, [x]), run_ours(model, [x])
    assert got[0].shape == ref[0].shape
    assert_close(got[0], ref[0], tol=1e-5)


@pytest.mark.parametrize("frames,bins,rate,upper,lower,channels,coefficients", [
    (5, 129, 16000, 4000, 20, 40, 13),  # the TF speech-commands defaults
    (3, 257, 16000, 7600, 125, 30, 30),
    (4, 65, 8000, 3999.7, 0, 12, 5),  # a float limit: the official kernel truncates it
    (2, 33, 16000, 12000, 20, 10, 4),  # upper limit past the spectrum: the official kernel outputs zeros
    (2, 17, 16000, 300, 250, 5, 3),  # a band with no bins (mel spectrum floored at 1e-12)
])
def test_mfcc(frames, bins, rate, upper, lower, channels, coefficients):
    rng = np.random.default_rng(bins)
    spec = (rng.random((2, frames, bins)) ** 4 * 50).astype(np.float32)
    spec[0, 0, :] = 0.0
    model = _mfcc_model(spec.shape, rate, upper, lower, channels, coefficients)
    ref, got = run_official(model, [spec]), run_ours(model, [spec])
    assert_close(got[0], ref[0], tol=1e-5)


def test_mfcc_rate_input_and_spectrogram_chain():
    """The speech-commands front end: AudioSpectrogram -> Mfcc, the sample rate given as a model input."""
    b = ModelBuilder()
    x = b.add_input("audio", np.float32, [4000, 1])
    r = b.add_input("rate", np.int32, [1])
    s = b.add_tensor("spectrogram", np.float32, [1, _frames(4000, 480, 160), 257])
    y = b.add_tensor("mfcc", np.float32, [1, _frames(4000, 480, 160), 13])
    b.add_custom_op("AudioSpectrogram", [x], [s], options={"window_size": 480, "stride": 160,
                                                           "magnitude_squared": True})
    b.add_custom_op("Mfcc", [s, r], [y], options={"upper_frequency_limit": 4000, "lower_frequency_limit": 20,
                                                  "filterbank_channel_count": 40, "dct_coefficient_count": 13})
    b.mark_output(y)
    model = b.build()
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal((4000, 1)) * 0.1).astype(np.float32)
    for rate in (16000, 8000):
        inputs = [audio, np.array([rate], np.int32)]
        assert_close(run_ours(model, inputs)[0], run_official(model, inputs)[0], tol=1e-5)


def test_audio_errors():
    it = Interpreter(model_content=_spectrogram_model(100, 1, 1, 1, True))
    with pytest.raises(ValueError, match="AudioSpectrogram.*window_size must be >= 2"):
        it.allocate_tensors()
    it = Interpreter(model_content=_mfcc_model((1, 2, 33), 16000, 4000, 20, 10, 12))
    with pytest.raises(ValueError, match="Mfcc.*dct_coefficient_count 12 exceeds"):
        it.allocate_tensors()
    it = Interpreter(model_content=_mfcc_model((1, 2, 33), 16000, 20, 20, 10, 5))
    with pytest.raises(ValueError, match="upper_frequency_limit 20 must exceed"):
        it.allocate_tensors()
