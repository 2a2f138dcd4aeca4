"""PAD, PADV2 and STABLEHLO_PAD (a fill, then a strided copy of the input) and MIRROR_PAD (a copy through index maps),
over raw words."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.movement.transpose import (
    box_rows,
    contiguous_strides,
    schedule_fill,
    schedule_strided_copy,
    word_size,
    words,
)
from numba import njit

from lite_numba.ops import PrepareContext, kernel

PADDING_TYPES = (np.int32, np.int64, np.int8, np.int16, np.bool_)


def read_paddings(ctx: PrepareContext, rank: int, types=PADDING_TYPES) -> list[tuple[int, int]]:
    """The [rank, 2] paddings input as (before, after) pairs, validated."""
    p = ctx.input(1)
    ctx.check(p.dtype in [np.dtype(t) for t in types],
              f"paddings have type {p.dtype.name}, expected one of " + ", ".join(np.dtype(t).name for t in types))
    ctx.check(p.ndim == 2 and p.shape[0] == rank and p.shape[1] == 2,
              f"paddings have shape {list(p.shape)}, expected [{rank}, 2]")
    vals = np.asarray(ctx.value(1)).astype(np.int64).reshape(rank, 2)
    pairs = [(int(a), int(b)) for a, b in vals]
    for d, (a, b) in enumerate(pairs):
        ctx.check(a >= 0 and b >= 0, f"paddings of dimension {d} ({a}, {b}) must be non-negative")
        ctx.check(max(a, b) < (1 << 31), f"paddings of dimension {d} overflow int32")
    return pairs


def schedule_interior(ctx: PrepareContext, x, out, pairs) -> None:
    """Copy x into the interior of out (offset by the `before` paddings)."""
    os = contiguous_strides(out.shape)
    schedule_strided_copy(ctx, x, out, x.shape, contiguous_strides(x.shape), os,
                          ob=sum(a * s for (a, _), s in zip(pairs, os)))


def pad_value(ctx: PrepareContext, x, out):
    """The padding element: PADV2's constant (a tensor), else 0 / the output zero point for quantized types."""
    cv = ctx.input(2) if ctx.num_inputs > 2 else None
    quantized = x.dtype == np.uint8 or (x.dtype in (np.int8, np.int16) and x.quantization.scales.size > 0)
    if cv is None:
        if quantized:
            info = np.iinfo(x.dtype)
            zp = out.zero_point
            ctx.check(info.min <= zp <= info.max, f"output zero point {zp} is not representable in {x.dtype.name}")
            return zp
        return 0
    ctx.check(cv.dtype == x.dtype, f"constant value has type {cv.dtype.name}, expected {x.dtype.name}")
    ctx.check(cv.size == 1, f"constant value must have one element, got shape {list(cv.shape)}")
    if quantized:
        # TFLite requires the constant in the output's quantization (no requantization)
        ctx.check(cv.zero_point == out.zero_point and np.float32(cv.scale) == np.float32(out.scale),
                  "constant value must have the output's scale and zero point")
    return cv


def prepare_pad(ctx: PrepareContext) -> None:
    """PAD/PADV2: out = x surrounded by paddings of a constant (0, the zero point, or PADV2's value)."""
    ctx.check_num(inputs=(2, 3), outputs=1)
    x = ctx.input(0)
    pairs = read_paddings(ctx, x.ndim)
    shape = [n + a + b for n, (a, b) in zip(x.shape, pairs)]
    out = ctx.set_output(0, shape, x.dtype)
    value = pad_value(ctx, x, out)
    if isinstance(value, int):
        value = np.asarray(value).astype(x.dtype)
    schedule_fill(ctx, out, value)  # always (even with zero paddings): the runner depends on structure only
    schedule_interior(ctx, x, out, pairs)


PAD = kernel("PAD")(prepare_pad)
PADV2 = kernel("PADV2")(prepare_pad)


@njit(cache=True, nogil=True)
def copy_mapped(x, out, shp, maps, moff, xs, tail):
    """out (row-major over shp, `tail` words per index) = the `tail` words of x at block sum_d maps[moff[d] + i_d] *
    xs[d]: a copy through per-dimension index maps, moving contiguous runs of `tail` words."""
    rank, inner, rows = box_rows(shp)
    m_in = moff[rank - 1]
    s_in = xs[rank - 1]
    o = 0
    for r in range(rows):
        rem = r
        xo = 0
        for d in range(rank - 2, -1, -1):
            q = rem // shp[d]
            i = rem - q * shp[d]
            rem = q
            xo += maps[moff[d] + i] * xs[d]
        for j in range(inner):
            src = (xo + maps[m_in + j] * s_in) * tail
            ov = out[o:o + tail]
            xv = x[src:src + tail]
            for k in range(tail):
                ov[k] = xv[k]
            o += tail


def mirror_map(n: int, before: int, after: int, off: int) -> np.ndarray:
    """Input index of every output index of one dimension (REFLECT: off=1, SYMMETRIC: off=0)."""
    p = np.arange(-before, n + after)
    p = np.where(p < 0, -p - 1 + off, p)
    return np.where(p >= n, 2 * n - 1 - off - p, p)


@kernel("MIRROR_PAD")
def MIRROR_PAD(ctx: PrepareContext) -> None:
    """Pad by mirroring: REFLECT (mode 0, edge not repeated) or SYMMETRIC (mode 1, edge repeated).

    One copy through per-dimension index maps (built here), so the compiled runner does not depend on which
    borders are padded."""
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    mode = int(ctx.options.get("mode", 0))
    ctx.check(mode in (0, 1), f"mode {mode} is not REFLECT (0) or SYMMETRIC (1)")
    off = 1 if mode == 0 else 0
    pairs = read_paddings(ctx, x.ndim, (np.int32, np.int64))
    for d, ((a, b), n) in enumerate(zip(pairs, x.shape)):
        ctx.check(max(a, b) <= n - off, f"paddings ({a}, {b}) of dimension {d} exceed the input size {n}"
                  + (" minus 1 (REFLECT)" if off else ""))
    out_shape = [n + a + b for n, (a, b) in zip(x.shape, pairs)]
    out = ctx.set_output(0, out_shape, x.dtype)
    elem = word_size(ctx, x)
    # trailing dimensions without padding move as contiguous runs ("tail") instead of through index maps
    lead = x.ndim
    while lead > 0 and pairs[lead - 1] == (0, 0):
        lead -= 1
    tail = int(np.prod(x.shape[lead:], dtype=np.int64)) * (elem // min(elem, 8))
    word = min(elem, 8)
    shp = list(out_shape[:lead]) or [1]
    xs = contiguous_strides(x.shape[:lead]) or [0]
    maps = [mirror_map(n, a, b, off) for n, (a, b) in zip(x.shape[:lead], pairs[:lead])] or [np.zeros(1, np.int64)]
    moff = np.cumsum([0] + [m.size for m in maps[:-1]])
    ctx.call(copy_mapped, words(ctx, x, word), words(ctx, out, word), np.array(shp, np.int64),
             np.concatenate(maps).astype(np.int64), moff.astype(np.int64), np.array(xs, np.int64), tail)




@kernel("STABLEHLO_PAD")
def STABLEHLO_PAD(ctx: PrepareContext) -> None:
    """stablehlo.pad: out = the padding value everywhere, x's element i at edge_padding_low + i * (interior_padding
    + 1) per dimension; negative edge paddings crop (tflite/kernels/stablehlo_pad.cc). When an output dimension is
    not positive, every output dimension is 0, as officially."""
    ctx.check_num(inputs=2, outputs=1)
    x, value = ctx.input(0), ctx.input(1)
    ctx.check(value.dtype == x.dtype, f"padding value has type {value.dtype.name}, the operand {x.dtype.name}")
    ctx.check(value.size == 1, f"padding value must have one element, has shape {list(value.shape)}")
    ctx.check(x.ndim >= 1, "the operand must have rank >= 1")
    opts = ctx.options
    lo, hi, interior = (list(opts.get(k) or [0] * x.ndim) for k in ("edge_padding_low", "edge_padding_high",
                                                                    "interior_padding"))
    for key, v in (("edge_padding_low", lo), ("edge_padding_high", hi), ("interior_padding", interior)):
        ctx.check(len(v) == x.ndim, f"{key} has {len(v)} values for an operand of rank {x.ndim}")
    ctx.check(all(i >= 0 for i in interior), f"interior_padding {interior} must be non-negative")
    shape = [n + max(n - 1, 0) * i + a + b for n, i, a, b in zip(x.shape, interior, lo, hi)]
    ctx.check(all(d < (1 << 31) for d in shape), f"output shape {shape} overflows int32")
    if any(d <= 0 for d in shape):
        shape = [0] * x.ndim
    out = ctx.set_output(0, shape, x.dtype)
    schedule_fill(ctx, out, value)
    box, first = [], []
    for n, i, a, d in zip(x.shape, interior, lo, shape):
        step = i + 1
        i0 = max(0, -(a // step) if a < 0 else 0)  # the first element landing at or after 0
        i1 = min(n - 1, (d - 1 - a) // step) if d > 0 else -1  # the last one before the end
        box.append(max(i1 - i0 + 1, 0))
        first.append(i0)
    xs, os = contiguous_strides(x.shape), contiguous_strides(shape)
    if not all(b > 0 for b in box):  # nothing of x lands in out: an empty copy (the runner keeps its structure)
        box, first, lo = [0] * x.ndim, [0] * x.ndim, [0] * x.ndim
    schedule_strided_copy(ctx, x, out, box, xs, [s * (i + 1) for s, i in zip(os, interior)],
                          xb=sum(f * s for f, s in zip(first, xs)),
                          ob=sum((a + f * (i + 1)) * s for a, f, i, s in zip(lo, first, interior, os)))


__all__ = ["PAD", "PADV2", "MIRROR_PAD", "STABLEHLO_PAD"]
