"""FULLY_CONNECTED with weights kept packed with BlockwiseQuantization (INT4 / INT2, float activations); the
quantized variant (fully_connected_quantized) hands such nodes here.

The official builtin kernel (fully_connected.cc, ai-edge-litert 2.3.0) computes blockwise weights in one of two ways:

- EvalBlockwise4Bit, when the weights are INT4, constant, the depth K is even and at least 32 and there are at
  least 4 output units (the conditions of its optimized 4-bit path). Each input row is quantized to int8
  asymmetrically (BatchQuantizeFloats, always asymmetric whatever asymmetric_quantize_inputs says), giving q, the
  scaling factor sf and the zero point zp. For output unit n, in float32 and in this order: per block b of
  block_size values, the integer dot acc = sum q * w and the weight sum ksum = sum w; out += float(acc) * scale[n, b]
  and kfsum += scale[n, b] * float(ksum) (scales: the FLOAT16 tensor widened exactly); then out -= float(zp) * kfsum,
  out *= sf, out += bias[n] (when there is a bias). The fused activation is not applied. The block's dot is summed
  in an int32 that takes each product through float32 (`c_ref_acc += q * float(w)`): exact while the sum stays below
  2^24, i.e. block sizes up to 16384; larger blocks are summed that way here too.
- Otherwise (INT2 weights, or INT4 with fewer than 4 units, K below 32 or odd) the plain hybrid EvalHybridDense,
  which scales by the tensor's per-tensor scale: a blockwise tensor has none (0), so the product is multiplied by 0
  and every output is act(bias) (0 without a bias; NaN in a row whose scaling factor is not finite). That is what
  the official runtime answers, so it is what we answer: such weights do not change the result.

The weights stay packed: each unit's row is decoded once per call into a scratch row of K float32 while all input
rows use it (one pass over the packed weights per call); a block's dot product is summed in float32 in vector order,
exact because every partial sum is an integer below 2^24 (the bound that makes the official sum exact too), with
the low and high nibbles (even and odd positions) in separate runs so that the decoding vectorizes too.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1, ACT_SIGN_BIT, ACT_TANH
from lite_numba.kernels.base.hybrid_quant import quantize_rows
from lite_numba.kernels.base.packed_ints import unpack_run
from lite_numba.kernels.linear.fc_hybrid import (
    apply_float_activation,
    hybrid_fc_finish,
    hybrid_fc_zero_input,
    schedule_hybrid_rows,
)
from lite_numba.kernels.linear.fully_connected import float_fc_output, schedule_zero_fill
from lite_numba.kernels.linear.hybrid_schedule import schedule_int4
from numba import njit

from lite_numba.ops import PrepareContext

# the optimized 4-bit path of the official kernel (optimized_4bit::FilterWidth, FilterDepth)
FILTER_WIDTH = 4
FILTER_DEPTH = 32
# |q * w| <= 128 * 8: a block's int32-through-float32 sum is exact up to this many products
_EXACT_BLOCK = (1 << 24) // 1024


@njit(cache=True, nogil=True, fastmath=True)
def exact_block_dots(a, ia, b, ib, c, ic, d, id_, nb, bs, dots):
    """dots[j] = sum over i < bs of a[ia + o + i] * b[ib + o + i] + c[ic + o + i] * d[id_ + o + i] with o = j * bs,
    for each block j < nb, in float32 in whatever order vectorizes: exact (so the same in every order) when the
    values are integers and the sum of the products' magnitudes stays below 2^24."""
    for j in range(nb):
        o = j * bs
        a_ = a[ia + o:ia + o + bs]
        b_ = b[ib + o:ib + o + bs]
        c_ = c[ic + o:ic + o + bs]
        d_ = d[id_ + o:id_ + o + bs]
        s = np.float32(0.0)
        for i in range(bs):
            s += a_[i] * b_[i] + c_[i] * d_[i]
        dots[j] = s


@njit(cache=True, nogil=True)
def decode_nibbles(packed, start, h, lo, hi):
    """lo[j] = the low nibble and hi[j] the high nibble of packed[start + j], j < h, as float32 (-8 .. 7)."""
    p = packed[start:start + h]
    lo_h = lo[:h]
    hi_h = hi[:h]
    for j in range(h):  # sign-extended by arithmetic shifts of the int8: vectorizes
        v = p[j]
        lo_h[j] = np.float32(np.int8(v << 4) >> 4)
        hi_h[j] = np.float32(np.int8(v) >> 4)


@njit(cache=True, nogil=True)
def fc_blockwise_4bit(q, qf, zp, sf, packed, scales, bias, has_bias, out, M, K, N, bs, exact, lo, hi, dots, ones):
    """EvalBlockwise4Bit (module doc): out [M, N] from the quantized rows q [M, K] (zero points zp, scaling factors
    sf), the packed INT4 weights [N, K] and their float32 block scales [N, K / bs]. qf (M * K), lo (K), hi (K / 2)
    and dots (K / bs) are float32 scratch, ones K float32 ones: the rows and one unit's weights as floats, whose block
    dot products are exact integers when `exact` (bs <= _EXACT_BLOCK). With an even block size the values at even
    and odd positions are kept apart (rows as [evens | odds], the weights' low nibbles in lo, high ones in hi), so
    that decoding and the products run over whole vectors; an odd block size keeps them in order (all in lo)."""
    nb = K // bs
    pairs = bs % 2 == 0
    h = K // 2 if pairs else 0  # where the odd positions start (K is even on this path)
    for m in range(M):
        base = m * K
        if pairs:
            for j in range(h):
                qf[base + j] = np.float32(q[base + 2 * j])
                qf[base + h + j] = np.float32(q[base + 2 * j + 1])
        else:
            for i in range(K):
                qf[base + i] = np.float32(q[base + i])
    hb = bs // 2 if pairs else bs
    for n in range(N):
        if pairs:
            decode_nibbles(packed, n * h, h, lo, hi)
            exact_block_dots(ones, 0, lo, 0, ones, 0, hi, 0, nb, hb, dots)  # the weight sums (exact: <= 8 * bs)
        else:
            unpack_run(packed, n * K, K, 4, lo)
            exact_block_dots(ones, 0, lo, 0, ones, 0, lo, 0, nb, hb, dots)
        kf = np.float32(0.0)
        for b in range(nb):
            ks = dots[b] if pairs else np.float32(dots[b] * np.float32(0.5))  # odd blocks: counted twice
            kf = np.float32(kf + np.float32(scales[n * nb + b] * ks))
        for m in range(M):
            base = m * K
            if exact and pairs:
                exact_block_dots(qf, base, lo, 0, qf, base + h, hi, 0, nb, hb, dots)
            elif exact:
                exact_block_dots(qf, base, lo, 0, qf, base, lo, 0, nb, bs, dots)  # counted twice: halved below
                for b in range(nb):
                    dots[b] = np.float32(dots[b] * np.float32(0.5))
            else:  # the official int32 += float32 product, through float32 at every step, in the values' order
                for b in range(nb):
                    a = 0
                    for i in range(b * hb, (b + 1) * hb):
                        if pairs:
                            a = np.int64(np.float32(np.float32(a) + qf[base + i] * lo[i]))
                            a = np.int64(np.float32(np.float32(a) + qf[base + h + i] * hi[i]))
                        else:
                            a = np.int64(np.float32(np.float32(a) + qf[base + i] * lo[i]))
                    dots[b] = np.float32(a)
            o = np.float32(0.0)
            for b in range(nb):
                o = np.float32(o + np.float32(dots[b] * scales[n * nb + b]))
            o = np.float32(o - np.float32(np.float32(zp[m]) * kf))
            o = np.float32(o * sf[m])
            if has_bias:
                o = np.float32(o + bias[n])
            out[m * N + n] = o


@njit(cache=True, nogil=True)
def blockwise_dots(q, packed, M, K, N, bits, acc, row_sums, wrow):
    """acc[m, n] = sum_k q[m, k] * w[n, k] and row_sums[n] = sum_k w[n, k] (int32, wrapping) over the packed
    weights: the integer part of the official hybrid product the fallback path scales by 0 (module doc)."""
    for n in range(N):
        unpack_run(packed, n * K, K, bits, wrow)
        s = 0
        for k in range(K):
            s += wrow[k]
        row_sums[n] = np.int32(s)
        for m in range(M):
            base = m * K
            d = 0
            for k in range(K):
                d += np.int64(q[base + k]) * wrow[k]
            acc[m * N + n] = np.int32(d)


@njit(cache=True, nogil=True)
def quantize_rows_4bit(x, M, K, q, sf, offsets):
    """The official optimized 4-bit path's input quantization (BatchQuantizeFloats4Bit), for INT4 weights with
    per-channel (or per-tensor) scales: per row, d = max |x| (NaNs skipped; 127 when 0), q = int8(round half away
    (x * float(127 / d))), sf = float(d / 127) (both divisions in double), offsets = -7 * sum q (its zero point)."""
    for m in range(M):
        base = m * K
        d = np.float32(0.0)
        for k in range(K):
            a = abs(x[base + k])
            if d < a:
                d = a
        if d == 0:
            d = np.float32(127.0)
        scale = np.float32(127.0 / np.float64(d))
        sf[m] = np.float32(np.float64(d) / 127.0)
        s = 0
        for k in range(K):
            v = np.float32(x[base + k] * scale)
            if v != v:
                t = 0  # a NaN converts to int32's minimum, whose low byte is 0
            else:
                r = np.trunc(v)
                if v - r >= 0.5:
                    r += 1
                elif v - r <= -0.5:
                    r -= 1
                t = np.int64(r)
            qv = np.int8((t + 128) % 256 - 128)
            q[base + k] = qv
            s += qv
        offsets[m] = np.int32(s * -7)


@njit(cache=True, nogil=True)
def int8_as_float(q, out):
    """out = float32(q) (the quantized rows handed to the hybrid tiles, see int4_dots_on_tiles)."""
    for i in range(q.size):
        out[i] = np.float32(q[i])


@njit(cache=True, nogil=True)
def float_as_int32(v, out):
    """out = int32(v) for the exact integer floats the hybrid tiles stored (int4_dots_on_tiles)."""
    for i in range(v.size):
        out[i] = np.int32(v[i])


# |sum q * w| <= 127 * 8 * K must stay below 2**24, where every integer is a float32
INT4_TILE_DOTS_MAX_K = (1 << 24) // (127 * 8)


@njit(cache=True, nogil=True)
def int4_channel_finish(acc, sf, offsets, fscales, bias, has_bias, out, N, act):
    """EvalHybridDense4Bit's float side: out = float(offset) * sf * fscale [+ bias], then += float(dst) * sf * fscale
    with dst = acc + 7 * sum q (the official sum over nibbles w + 7; acc = sum q * w), then the activation."""
    for m in range(acc.size // N):
        base = m * N
        s = sf[m]
        val = np.float32(np.float32(offsets[m]) * s)
        for n in range(N):
            o = np.float32(val * fscales[n])
            if has_bias:
                o = np.float32(o + bias[n])
            dst = np.int32(acc[base + n] - offsets[m])
            o = np.float32(o + np.float32(np.float32(np.float32(dst) * s) * fscales[n]))
            out[base + n] = apply_float_activation(o, act)


def uses_int4_channel_path(type_name: str, batch: int, k: int, units: int) -> bool:
    """Whether the official kernel runs EvalHybridDense4Bit for constant INT4 weights with affine (per-channel or
    per-tensor) scales: the optimized 4-bit path's conditions, as for blockwise weights."""
    return type_name == "INT4" and batch > 0 and k % 2 == 0 and units >= FILTER_WIDTH and k >= FILTER_DEPTH


def uses_4bit_path(bits: int, batch: int, k: int, units: int) -> bool:
    """Whether the official kernel runs EvalBlockwise4Bit for these weights (else the hybrid path, module doc)."""
    return bits == 4 and batch > 0 and k % 2 == 0 and units >= FILTER_WIDTH and k >= FILTER_DEPTH


def prepare_blockwise_fc(ctx: PrepareContext, x, w, b, out) -> None:
    """Prepare FULLY_CONNECTED whose weights w are packed and blockwise quantized (module doc)."""
    what = f"weights {w.name!r} ({w.spec.type_name}, blockwise block_size {w.quantization.block_size})"
    ctx.check(x.dtype == np.float32, f"{what} need float32 input (dynamic-range), got {x.dtype.name}: the official "
                                     f"kernels take blockwise weights only with float activations")
    ctx.check_dtype(out, np.float32)
    act = ctx.options.get("fused_activation_function", 0)
    ctx.check(act in (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH, ACT_SIGN_BIT),
              f"fused activation {act} is not supported")
    o, units, k, batch = float_fc_output(ctx, x, w, b)
    if o.size == 0:
        return
    if k == 0:
        return schedule_zero_fill(ctx, o)
    bits = w.spec.packed_bits
    bias = ctx.view(b, (units,)) if b is not None else np.zeros(units, np.float32)
    o_flat = ctx.view(o, (o.size,))
    bs = w.quantization.block_size
    scales = w.quantization.block_scales.astype(np.float32).reshape(-1)
    if uses_4bit_path(bits, batch, k, units) and schedule_int4(ctx, ctx.view(x, (x.size,)), np.asarray(w.data), scales,
                                                               bias, b is not None, o_flat, batch, k, units, bs):
        return  # the int8 dot-product tiles of the level in force, nibbles unpacked in registers (fc_int4)
    packed = ctx.const(w.data)
    if not uses_4bit_path(bits, batch, k, units):
        q, sf, zp = schedule_hybrid_rows(ctx, x, batch, k)
        acc = ctx.temp((batch * units,), np.int32)
        row_sums = ctx.temp((units,), np.int32)
        ctx.call(blockwise_dots, q, packed, batch, k, units, bits, acc, row_sums, ctx.temp((k,), np.int32))
        zero_scales = np.zeros(units, np.float32)  # the per-tensor scale a blockwise tensor has
        ctx.call(hybrid_fc_finish, acc, sf, zp, row_sums, zero_scales, bias, o_flat, units, act)
        ctx.call(hybrid_fc_zero_input, ctx.view(x, (x.size,)), bias, o_flat, units, act)
        return
    exact = bs <= (_EXACT_BLOCK if bs % 2 == 0 else _EXACT_BLOCK // 2)  # an odd block's dot is summed twice
    q = ctx.temp((batch * k,), np.int8)
    sf = ctx.temp((batch,), np.float32)
    zp = ctx.temp((batch,), np.int32)
    ctx.call(quantize_rows, ctx.view(x, (x.size,)), batch, k, True, q, sf, zp)
    ctx.call(fc_blockwise_4bit, q, ctx.temp((batch * k,), np.float32), zp, sf, packed, scales, bias,
             int(b is not None), o_flat, batch, k, units, bs, int(exact), ctx.temp((k,), np.float32),
             ctx.temp((k // 2,), np.float32), ctx.temp((k // bs,), np.float32), np.ones(k, np.float32))
