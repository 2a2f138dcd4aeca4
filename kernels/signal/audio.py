"""Audio feature ops of TF's speech models: AudioSpectrogram and Mfcc (custom ops the official builtin resolver
registers). Semantics from TFLite's audio_spectrogram.cc, mfcc.cc and internal/spectrogram.cc, mfcc.cc,
mfcc_mel_filterbank.cc, mfcc_dct.cc (read for meaning, not copied).

AudioSpectrogram: input [samples, channels] float32 -> [channels, frames, fft_length / 2 + 1], frames =
1 + (samples - window_size) // stride (0 when the input is shorter than a window). Every frame is multiplied by a
periodic Hann window (double), zero-padded to the next power of two and transformed (a double real FFT, as the
official Ooura rdft, through a complex FFT of half the length); the output is
|X|^2 rounded to float32, or its float32 square root unless magnitude_squared.

Mfcc: input [channels, frames, bins] squared magnitudes, sample rate (int32, one element) -> [channels, frames,
dct_coefficient_count]: square roots summed under triangular mel filters (HTK style, DC excluded), floored at
1e-12, log, then the first DCT-II coefficients, all in double. The filter bank and DCT tables depend on the sample
rate, which is read at prepare (constant in real models; a computed rate makes the node dynamic).
"""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.signal.fft import fft_inplace, fft_tables, real_fft_bin
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# ------------------------------------------------------------------------------------------------------------------
# AudioSpectrogram
# ------------------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def spectrogram(x, window, stride, squared, out, re, im, rev, twr, twi, wr, wi):
    """x [samples, channels] float32 -> out [channels, frames, bins] float32. The real FFT of length n = 2h is one
    complex FFT of length h over (even, odd) sample pairs, then split: re/im float64 [h] scratch, rev/twr/twi the
    length-h FFT tables, wr/wi = cos/-sin(2 pi k / n) for k <= h."""
    channels = x.shape[1]
    frames = out.shape[1]
    h = re.shape[0]
    w = window.shape[0]
    for c in range(channels):
        for f in range(frames):
            start = f * stride
            for j in range(h):
                a = 2 * j
                re[j] = np.float64(x[start + a, c]) * window[a] if a < w else 0.0
                im[j] = np.float64(x[start + a + 1, c]) * window[a + 1] if a + 1 < w else 0.0
            fft_inplace(re, im, h, rev, twr, twi)
            for k in range(h + 1):
                xr, xi = real_fft_bin(re, im, h, k, wr, wi)
                pw = np.float32(xr * xr + xi * xi)
                out[c, f, k] = pw if squared else np.sqrt(pw)


def _keep_options(options):
    """init: the decoded custom options, checked by prepare (which can name the node)."""
    return options


def _options(ctx: PrepareContext, required: tuple[str, ...]) -> dict:
    opts = ctx.state
    ctx.check(isinstance(opts, dict), "custom options are not a flexbuffer map")
    missing = [k for k in required if opts.get(k) is None]
    ctx.check(not missing, f"custom options lack {', '.join(missing)}")
    return opts


@kernel("AudioSpectrogram", init=_keep_options)
def AUDIO_SPECTROGRAM(ctx: PrepareContext) -> None:
    """Windowed power (or magnitude) spectrogram of every channel."""
    opts = _options(ctx, ("window_size", "stride"))
    window_size, stride = int(opts["window_size"]), int(opts["stride"])
    squared = bool(opts.get("magnitude_squared") or False)
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32)
    ctx.check(x.ndim == 2, f"input must have rank 2 [samples, channels], got {list(x.shape)}")
    ctx.check(window_size >= 2, f"window_size must be >= 2, got {window_size}")
    ctx.check(stride >= 1, f"stride must be >= 1, got {stride}")
    samples, channels = x.shape
    fft_length = 1 << (window_size - 1).bit_length()
    frames = 0 if samples < window_size else 1 + (samples - window_size) // stride
    out = ctx.set_output(0, (channels, frames, fft_length // 2 + 1), np.float32)
    if out.size == 0:
        return
    pi = math.atan(1.0) * 4.0
    window = np.array([0.5 - 0.5 * math.cos((2.0 * pi * i) / window_size) for i in range(window_size)])
    h = fft_length // 2
    rev, twr, twi = fft_tables(h)
    ang = 2.0 * np.pi * np.arange(h + 1) / fft_length
    ctx.call(spectrogram, x, window, stride, int(squared), out, ctx.temp((h,), np.float64),
             ctx.temp((h,), np.float64), rev, twr, twi, np.cos(ang), -np.sin(ang))


# ------------------------------------------------------------------------------------------------------------------
# Mfcc
# ------------------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def mfcc(spec, start, end, give_up, band, weights, cosines, out, mel):
    """spec [frames, bins] float32 -> out [frames, coefficients] float32; mel: float64 [channels] scratch.
    give_up: the official filter bank returns nothing (the spectrum has no bin `end`), so every coefficient is 0."""
    n_ch = mel.shape[0]
    n_coef = cosines.shape[0]
    for f in range(spec.shape[0]):
        if give_up:
            for i in range(n_coef):
                out[f, i] = 0.0
            continue
        for c in range(n_ch):
            mel[c] = 0.0
        for i in range(start, end + 1):
            v = math.sqrt(np.float64(spec[f, i]))
            weighted = v * weights[i]
            ch = band[i]
            if ch >= 0:
                mel[ch] += weighted
            if ch + 1 < n_ch:
                mel[ch + 1] += v - weighted
        for c in range(n_ch):
            v = mel[c]
            if v < 1e-12:
                v = 1e-12
            mel[c] = math.log(v)
        for i in range(n_coef):
            s = 0.0
            for c in range(n_ch):
                s += cosines[i, c] * mel[c]
            out[f, i] = np.float32(s)


def _mel(freq: float) -> float:
    return 1127.0 * math.log1p(freq / 700.0)


def mfcc_tables(bins: int, rate: float, channels: int, coefficients: int, lower: float, upper: float):
    """(start, end, band mapper, weights, DCT cosines) as the official MfccMelFilterbank / MfccDct build them."""
    mel_low, mel_hi = _mel(lower), _mel(upper)
    spacing = (mel_hi - mel_low) / float(channels + 1)
    centres = [mel_low + spacing * (i + 1) for i in range(channels + 1)]
    hz_per_bin = 0.5 * rate / float(bins - 1)
    start = int(1.5 + lower / hz_per_bin)
    end = int(upper / hz_per_bin)
    band = np.empty(bins, np.int64)
    weights = np.zeros(bins, np.float64)
    channel = 0
    for i in range(bins):
        melf = _mel(i * hz_per_bin)
        if i < start or i > end:
            band[i] = -2
            continue
        while channel < channels and centres[channel] < melf:
            channel += 1
        band[i] = channel - 1
    for i in range(bins):
        ch = int(band[i])
        if start <= i <= end:
            if ch >= 0:
                weights[i] = (centres[ch + 1] - _mel(i * hz_per_bin)) / (centres[ch + 1] - centres[ch])
            else:
                weights[i] = (centres[0] - _mel(i * hz_per_bin)) / (centres[0] - mel_low)
    fnorm = math.sqrt(2.0 / channels)
    arg = math.atan(1.0) * 4.0 / channels
    cosines = np.array([[fnorm * math.cos(i * arg * (j + 0.5)) for j in range(channels)]
                        for i in range(coefficients)], np.float64)
    return start, end, band, weights, cosines


@kernel("Mfcc", init=_keep_options)
def MFCC(ctx: PrepareContext) -> None:
    """Mel-frequency cepstral coefficients of every spectrogram frame."""
    names = ("upper_frequency_limit", "lower_frequency_limit", "filterbank_channel_count", "dct_coefficient_count")
    opts = _options(ctx, names)
    # the official Init reads every option with AsInt64 (a float limit is truncated)
    upper, lower, channels, coefficients = (int(opts[k]) for k in names)
    ctx.check_num(inputs=2, outputs=1)
    spec, rate_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(spec, np.float32)
    ctx.check_dtype(rate_t, np.int32)
    ctx.check(spec.ndim == 3 and min(spec.shape) > 0,
              f"spectrogram must have rank 3 [channels, frames, bins] with no empty dimension, got {list(spec.shape)}")
    ctx.check(rate_t.size == 1, f"sample rate must have one element, got shape {list(rate_t.shape)}")
    ctx.check(coefficients > 0, f"dct_coefficient_count must be > 0, got {coefficients}")
    ctx.check(channels > 0, f"filterbank_channel_count must be > 0, got {channels}")
    ctx.check(coefficients <= channels,
              f"dct_coefficient_count {coefficients} exceeds filterbank_channel_count {channels}")
    bins = spec.shape[2]
    ctx.check(bins >= 2, f"the spectrogram needs at least 2 bins, got {bins}")
    ctx.check(lower >= 0, f"lower_frequency_limit must be >= 0, got {lower}")
    ctx.check(upper > lower, f"upper_frequency_limit {upper} must exceed lower_frequency_limit {lower}")
    out = ctx.set_output(0, spec.shape[:2] + (coefficients,), np.float32)
    rate = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    ctx.check(rate > 0, f"sample rate must be > 0, got {rate}")
    start, end, band, weights, cosines = mfcc_tables(bins, float(rate), channels, coefficients, float(lower),
                                                     float(upper))
    frames = spec.shape[0] * spec.shape[1]
    ctx.call(mfcc, ctx.view(spec, (frames, bins)), start, end, int(bins <= end), band, weights, cosines,
             ctx.view(out, (frames, coefficients)), ctx.temp((channels,), np.float64))


__all__ = ["AUDIO_SPECTROGRAM", "MFCC", "mfcc_tables"]
