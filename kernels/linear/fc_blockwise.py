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
  and every output is act(bias) (0 without a bias; NaN where an input row is not finite). That is what the official
  runtime answers, so it is what we answer: such weights do not change the result.

The weights stay packed: each unit's row is decoded once per call into a scratch row of K int32 while all input
rows use it (one pass over the packed weights per call).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1, ACT_SIGN_BIT, ACT_TANH
from lite_numba.kernels.base.hybrid_quant import quantize_rows
from lite_numba.kernels.base.packed_ints import unpack_run
from lite_numba.kernels.linear.fc_hybrid import hybrid_fc_finish, hybrid_fc_zero_input, schedule_hybrid_rows
from lite_numba.kernels.linear.fully_connected import fc_output_shape, schedule_zero_fill
from numba import njit

from lite_numba.ops import PrepareContext

# the optimized 4-bit path of the official kernel (optimized_4bit::FilterWidth, FilterDepth)
FILTER_WIDTH = 4
FILTER_DEPTH = 32
# |q * w| <= 128 * 8: a block's int32-through-float32 sum is exact up to this many products
_EXACT_BLOCK = (1 << 24) // 1024


@njit(cache=True, nogil=True)
def fc_blockwise_4bit(q, zp, sf, packed, scales, bias, has_bias, out, M, K, N, bs, exact, wrow):
    """EvalBlockwise4Bit (module doc): out [M, N] from the quantized rows q [M, K] (zero points zp, scaling factors
    sf), the packed INT4 weights [N, K] and their float32 block scales [N, K / bs]; wrow is a scratch of K int32."""
    nb = K // bs
    for n in range(N):
        unpack_run(packed, n * K, K, 4, wrow)
        kf = np.float32(0.0)
        for b in range(nb):
            ks = 0
            for i in range(b * bs, (b + 1) * bs):
                ks += wrow[i]
            kf = np.float32(kf + np.float32(scales[n * nb + b] * np.float32(ks)))
        for m in range(M):
            base = m * K
            o = np.float32(0.0)
            for b in range(nb):
                k0 = b * bs
                if exact:
                    acc = 0
                    for i in range(bs):
                        acc += np.int64(q[base + k0 + i]) * wrow[k0 + i]
                else:  # the official int32 += float32 product: through float32 at every step
                    acc = 0
                    for i in range(bs):
                        p = np.float32(np.int64(q[base + k0 + i]) * wrow[k0 + i])
                        acc = np.int64(np.float32(np.float32(acc) + p))
                o = np.float32(o + np.float32(np.float32(acc) * scales[n * nb + b]))
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
    units, k = w.shape
    shape, batch = fc_output_shape(ctx, x, units, k)
    o = ctx.set_output(0, shape, np.float32)
    if b is not None:
        ctx.check_dtype(b, np.float32)
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
    if o.size == 0:
        return
    if k == 0:
        return schedule_zero_fill(ctx, o)
    bits = w.spec.packed_bits
    packed = ctx.const(w.data)
    bias = ctx.view(b, (units,)) if b is not None else np.zeros(units, np.float32)
    wrow = ctx.temp((k,), np.int32)
    o_flat = ctx.view(o, (o.size,))
    if not uses_4bit_path(bits, batch, k, units):
        q, sf, zp = schedule_hybrid_rows(ctx, x, batch, k)
        acc = ctx.temp((batch * units,), np.int32)
        row_sums = ctx.temp((units,), np.int32)
        ctx.call(blockwise_dots, q, packed, batch, k, units, bits, acc, row_sums, wrow)
        zero_scales = np.zeros(units, np.float32)  # the per-tensor scale a blockwise tensor has
        ctx.call(hybrid_fc_finish, acc, sf, zp, row_sums, zero_scales, bias, o_flat, units, act)
        ctx.call(hybrid_fc_zero_input, ctx.view(x, (x.size,)), bias, o_flat, units, act)
        return
    bs = w.quantization.block_size
    scales = w.quantization.block_scales.astype(np.float32).reshape(-1)
    q = ctx.temp((batch * k,), np.int8)
    sf = ctx.temp((batch,), np.float32)
    zp = ctx.temp((batch,), np.int32)
    ctx.call(quantize_rows, ctx.view(x, (x.size,)), batch, k, True, q, sf, zp)
    ctx.call(fc_blockwise_4bit, q, zp, sf, packed, scales, bias, int(b is not None), o_flat, batch, k, units, bs,
             int(bs <= _EXACT_BLOCK), wrow)
