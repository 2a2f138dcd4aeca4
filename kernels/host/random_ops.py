"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL, MULTINOMIAL: the official runtime's Philox-4x32-10 streams, bit for bit;
STABLEHLO_RNG_BIT_GENERATOR (a pure function of its state input: an ordinary compiled kernel).

The official kernels draw from tsl's PhiloxRandom(seed, seed2) (seeds truncated to int32; key = seed, counter
words 2-3 = seed2), one 128-bit block per four uint32, and keep the generator in the node between invokes; with
seed == seed2 == 0 they seed from /dev/urandom (then no two runs agree, and neither do we). Conversions, as tsl
defines them:

- uniform float: the low 23 bits as the mantissa of a float in [1, 2), minus 1 (= m * 2^-23 exactly);
- standard normal: Box-Muller on pairs of uint32 in float: u1 = max(uniform(x0), 1e-7f),
  v1 = float(2 * pi (double) * uniform(x1)), r = sqrtf(-2 * logf(u1)), (sinf(v1) * r, cosf(v1) * r);
- multinomial: per row the cumulative sum (double) of exp(logit - max finite logit) over finite logits, each sample
  the upper bound of uniform_double(x0, x1) * total in it (52 random bits); before sampling, the node's generator
  skips batch * round_up(num_samples, 4) * 2 * 256 blocks and the samples come from a copy taken before the skip.

The generator must advance at every invoke and never be folded into a constant, so these are host ops (run from
Python at invoke time, like control flow) whose maths is compiled. The stream starts at the node's first
preparation and continues across invokes (the official runtime re-seeds when it re-prepares the node, e.g. after a
resize; lite-numba keeps the stream going).
"""

from __future__ import annotations

import math
import os

import numpy as np
from lite_numba.kernels.base.sort import upper_bound
from numba import njit

from lite_numba.ops import PrepareContext, kernel

M32 = 0xFFFFFFFF
TWO_PI = 2.0 * math.pi  # M_PI as a double, times 2.0f (exact)


@njit(cache=True, nogil=True)
def philox_block(state, res):
    """res[0:4] = Philox-4x32-10 of (counter state[0:4], key state[4:6]); the counter then advances by one.
    Values are uint32 held in int64 (products wrap as the uint64 bit pattern; shifts are masked)."""
    c0, c1, c2, c3 = state[0], state[1], state[2], state[3]
    k0, k1 = state[4], state[5]
    for r in range(10):
        p0 = np.int64(0xD2511F53) * c0
        p1 = np.int64(0xCD9E8D57) * c2
        n0 = ((p1 >> 32) & M32) ^ c1 ^ k0
        n1 = p1 & M32
        n2 = ((p0 >> 32) & M32) ^ c3 ^ k1
        n3 = p0 & M32
        c0, c1, c2, c3 = n0, n1, n2, n3
        if r < 9:
            k0 = (k0 + 0x9E3779B9) & M32
            k1 = (k1 + 0xBB67AE85) & M32
    res[0], res[1], res[2], res[3] = c0, c1, c2, c3
    # SkipOne
    state[0] = (state[0] + 1) & M32
    if state[0] == 0:
        state[1] = (state[1] + 1) & M32
        if state[1] == 0:
            state[2] = (state[2] + 1) & M32
            if state[2] == 0:
                state[3] = (state[3] + 1) & M32


@njit(cache=True, nogil=True)
def philox_skip(state, count):
    """Advance the counter by `count` blocks (tsl PhiloxRandom::Skip)."""
    lo = count & M32
    hi = (count >> 32) & M32
    state[0] = (state[0] + lo) & M32
    if state[0] < lo:
        hi += 1
    state[1] = (state[1] + hi) & M32
    if state[1] < hi:
        state[2] = (state[2] + 1) & M32
        if state[2] == 0:
            state[3] = (state[3] + 1) & M32


@njit(cache=True, nogil=True)
def _uniform_f32(x):
    return np.float32(x & 0x7FFFFF) * np.float32(1.0 / 8388608.0)


@njit(cache=True, nogil=True)
def random_fill(state, out, normal):
    """out = the next uniform [0, 1) or standard normal float32 values of the stream."""
    res = np.zeros(4, np.int64)
    n = out.size
    i = 0
    eps = np.float32(1.0e-7)
    while i < n:
        philox_block(state, res)
        k = min(4, n - i)
        if normal:
            for j in range(0, k, 2):
                u1 = _uniform_f32(res[j])
                if u1 < eps:
                    u1 = eps
                v1 = np.float32(TWO_PI * np.float64(_uniform_f32(res[j + 1])))
                r = math.sqrt(np.float32(-2.0) * math.log(u1))
                out[i + j] = math.sin(v1) * r
                if j + 1 < k:  # the official kernel writes one float past an odd-sized output here
                    out[i + j + 1] = math.cos(v1) * r
        else:
            for j in range(k):
                out[i + j] = _uniform_f32(res[j])
        i += k


@njit(cache=True, nogil=True)
def multinomial(state, logits, out, cdf):
    """out[b, j] = class index drawn from softmax(logits[b]); cdf: float64 scratch of one row."""
    batch, classes = logits.shape
    ns = out.shape[1]
    copy = state.copy()
    philox_skip(state, np.int64(batch) * ((ns + 3) // 4 * 4) * 2 * 256)
    res = np.zeros(4, np.int64)
    used = 4
    for b in range(batch):
        mx = np.float32(-3.4028234663852886e38)
        for i in range(classes):
            v = logits[b, i]
            if np.isfinite(v) and mx < v:
                mx = v
        m = np.float64(mx)
        total = 0.0
        for i in range(classes):
            v = logits[b, i]
            if np.isfinite(v):
                total += math.exp(np.float64(v) - m)
            cdf[i] = total
        for j in range(ns):
            if used == 4:
                philox_block(copy, res)
                used = 0
            x0, x1 = res[used], res[used + 1]
            used += 2
            u = np.float64(((x0 & 0xFFFFF) << 32) | x1) * (1.0 / 4503599627370496.0)
            target = u * total
            out[b, j] = upper_bound(cdf, classes, target)


def _init_rng(options) -> dict:
    # the official params hold the seeds as C ints: the schema's int64 values are truncated to int32 (then widened
    # with their sign to the generator's uint64)
    seed, seed2 = (((int(options.get(k, 0) or 0) & M32) ^ 0x80000000) - 0x80000000 for k in ("seed", "seed2"))
    if seed == 0 and seed2 == 0:  # as the official kernel: a non-deterministic stream
        seed, seed2 = (int.from_bytes(os.urandom(8), "little") for _ in range(2))
    seed, seed2 = seed & (2 ** 64 - 1), seed2 & (2 ** 64 - 1)
    state = np.array([0, 0, seed2 & M32, seed2 >> 32, seed & M32, seed >> 32], np.int64)
    return {"rng": state}


def _prepare_random(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=1, outputs=1)
    shape_t = ctx.input(0)
    ctx.check_dtype(shape_t, np.int32)
    ctx.check(shape_t.ndim == 1, f"shape must be a vector, got shape {list(shape_t.shape)}")
    shape = [int(v) for v in np.asarray(ctx.value(0)).reshape(-1)]
    ctx.check(all(s >= 0 for s in shape), f"shape {shape} has a negative dimension")
    ctx.set_output(0, shape, np.float32)


def _host_random(normal: bool):
    def run(ctx: PrepareContext) -> None:
        shape = tuple(int(v) for v in np.asarray(ctx.input_array(0)).reshape(-1))
        out = ctx.output_array(0)
        if out is not None and out.shape == shape:  # the planned storage: filled in place, nothing allocated
            random_fill(ctx.state["rng"], out.reshape(-1), int(normal))
            return
        out = np.empty(shape, np.float32)
        random_fill(ctx.state["rng"], out.reshape(-1), int(normal))
        ctx.set_output_array(0, out)

    return run


RANDOM_UNIFORM = kernel("RANDOM_UNIFORM", init=_init_rng, host=_host_random(False))(_prepare_random)
RANDOM_STANDARD_NORMAL = kernel("RANDOM_STANDARD_NORMAL", init=_init_rng,
                                host=_host_random(True))(_prepare_random)


def _prepare_multinomial(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    logits, ns_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(logits, np.float32)
    ctx.check_dtype(ns_t, np.int32)
    ctx.check(logits.ndim == 2, f"logits must be [batch, classes], got shape {list(logits.shape)}")
    ctx.check(logits.shape[1] > 0, "logits need at least one class")
    ctx.check(ns_t.ndim == 0, f"num_samples must be a scalar, got shape {list(ns_t.shape)}")
    ctx.check_dtype(ctx.output(0), np.int32, np.int64)
    ns = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    ctx.check(ns >= 0, f"num_samples must be >= 0, got {ns}")
    ctx.set_output(0, (logits.shape[0], ns))


def _host_multinomial(ctx: PrepareContext) -> None:
    logits = np.ascontiguousarray(ctx.input_array(0))
    ns = int(np.asarray(ctx.input_array(1)).reshape(-1)[0])
    cdf = ctx.host_data
    if cdf is None or cdf.size != logits.shape[1]:  # scratch kept while the node keeps its preparation
        cdf = ctx.host_data = np.empty(logits.shape[1], np.float64)
    out = ctx.output_array(0)
    if out is not None and out.shape == (logits.shape[0], ns):  # the planned storage, filled in place
        multinomial(ctx.state["rng"], logits, out, cdf)
        return
    out = np.empty((logits.shape[0], ns), ctx.output(0).dtype)
    multinomial(ctx.state["rng"], logits, out, cdf)
    ctx.set_output_array(0, out)


MULTINOMIAL = kernel("MULTINOMIAL", init=_init_rng, host=_host_multinomial)(_prepare_multinomial)

__all__ = ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "STABLEHLO_RNG_BIT_GENERATOR"]


# --- STABLEHLO_RNG_BIT_GENERATOR (tflite/kernels/rng_bit_generator.cc, rng_util.cc) ----------------------------


@njit(cache=True, inline="always")
def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


@njit(cache=True, inline="always")
def _threefry_round(x0, x1, r0, r1, r2, r3, ks0, ks1, b):
    for rot in (r0, r1, r2, r3):
        x0 = (x0 + x1) & M32
        x1 = _rotl32(x1, rot) ^ x0
    return (x0 + ks0) & M32, (x1 + ks1 + b) & M32


@njit(cache=True, nogil=True)
def threefry2x32(k0, k1, c0, c1):
    """Threefry-2x32 with 20 rounds (rng_util's Threefry2x32) of counter (c0, c1) under key (k0, k1)."""
    k2 = k0 ^ k1 ^ 0x1BD11BDA
    x0, x1 = (c0 + k0) & M32, (c1 + k1) & M32
    x0, x1 = _threefry_round(x0, x1, 13, 15, 26, 6, k1, k2, 1)
    x0, x1 = _threefry_round(x0, x1, 17, 29, 16, 24, k2, k0, 2)
    x0, x1 = _threefry_round(x0, x1, 13, 15, 26, 6, k0, k1, 3)
    x0, x1 = _threefry_round(x0, x1, 17, 29, 16, 24, k1, k2, 4)
    x0, x1 = _threefry_round(x0, x1, 13, 15, 26, 6, k2, k0, 5)
    return x0, x1


@njit(cache=True, nogil=True)
def rng_bit_generator(state, out, key_out, threefry, st, res):
    """out (uint32 words) filled block by block from the counter in the state (uint32 words: key, counter), the
    counter's first word incremented per block with a carry into the second; key_out = the state with the
    advanced counter (Philox keeps a third state word, its counter's high half, as is)."""
    k0, k1 = np.int64(state[0]), np.int64(state[1])
    c0, c1 = np.int64(state[2]), np.int64(state[3])
    wide = state.size == 6
    c2 = np.int64(state[4]) if wide else k0
    c3 = np.int64(state[5]) if wide else k1
    for j in range(state.size):
        key_out[j] = state[j]
    i = 0
    n = out.size
    while i < n:
        if threefry:
            res[0], res[1] = threefry2x32(k0, k1, c0, c1)
            block = 2
        else:
            st[0], st[1], st[2], st[3], st[4], st[5] = c0, c1, c2, c3, k0, k1
            philox_block(st, res)
            block = 4
        for j in range(min(block, n - i)):
            out[i + j] = res[j]
        i += block
        c0 = (c0 + 1) & M32
        if c0 == 0:
            c1 = (c1 + 1) & M32
    key_out[0], key_out[1], key_out[2], key_out[3] = k0, k1, c0, c1


@kernel("STABLEHLO_RNG_BIT_GENERATOR")
def STABLEHLO_RNG_BIT_GENERATOR(ctx: PrepareContext) -> None:
    """stablehlo.rng_bit_generator: (output state, random bits) from the uint64 initial state: THREEFRY (a state of
    2 words) or PHILOX / DEFAULT (2 or 3 words); the bits fill the output's declared shape (int32, int64, uint32 or
    uint64) as 32-bit words in the order the official kernel writes them."""
    ctx.check_num(inputs=1, outputs=2)
    state, key, out = ctx.input(0), ctx.output(0), ctx.output(1)
    ctx.check(state.dtype == np.uint64 and state.ndim == 1, f"the initial state must be a 1-D uint64 tensor, is "
                                                             f"{state.dtype.name} of shape {list(state.shape)}")
    ctx.check(key.dtype == np.uint64, f"the output state must be uint64, is {key.dtype.name}")
    ctx.check(out.dtype in (np.int32, np.int64, np.uint32, np.uint64),
              f"the output must be int32, int64, uint32 or uint64, is {out.dtype.name}")
    algorithm = int(ctx.options.get("algorithm", 0))
    ctx.check(algorithm in (0, 1, 2), f"Unknown RNG algorithm: {algorithm}")
    words = state.shape[0]
    if algorithm == 2:
        ctx.check(words == 2, f"THREEFRY needs a state of 2 uint64, has {words}")
    else:
        ctx.check(words in (2, 3), f"PHILOX needs a state of 2 or 3 uint64, has {words}")
    ctx.check(all(d >= 0 for d in out.shape), f"the output shape {list(out.shape)} must be known")
    ctx.set_output(0, state.shape, np.uint64)
    ctx.set_output(1, out.shape, out.dtype)
    n = out.nbytes // 4
    ctx.call(rng_bit_generator, ctx.view(state, (2 * words,), np.uint32), ctx.view(out, (n,), np.uint32),
             ctx.view(key, (2 * words,), np.uint32), algorithm == 2, ctx.temp((6,), np.int64),
             ctx.temp((4,), np.int64))
