"""Float32 exp, erfc, tanh and the logistic function written so that LLVM vectorizes loops calling them (np.exp,
math.erfc, np.tanh are one libm call per element, which no loop vectorizer can widen).

exp: exp(t) = p(f) * 2**k with k = round(t / ln 2), f = t - k ln 2 (|f| <= ln 2 / 2, ln 2 split in two parts so
k ln 2 is exact), p a degree-6 Taylor polynomial (truncation ~1e-7 relative) and 2**k built from its exponent bits.
GELU's exact form, 0.5 x erfc(-x / sqrt(2)): erfc by the Chebyshev-fitted form t exp(-z^2 + poly(t)),
t = 1 / (1 + z/2), whose fractional error is below 1.2e-7 for every z >= 0 (Press et al., Numerical Recipes, section
6.2), folded into GELU (gelu_f32: ln 2 in the polynomial's constant, exp's reduction and a degree-5 polynomial in
fused multiply-adds; 2176 floats 1.6 -> 1.2 us on the Xeon model 167, worst relative error against float64 2.2e-6
over [-14, 14], the official libm form's 5.3e-6), compared with the official runtime by the activation tests.
tanh and the logistic function are the official build's own (Eigen's float approximations, reproduced step by
step), so TANH, LOGISTIC and the sequence ops' gates are bit-exact."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import isa
from lite_numba.kernels.base.llvm_ir import F32, I32, data_ptr, gep, i64, splat
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def wide_vectors(typingctx):
    """Let LLVM's loop vectorizer use 512-bit vectors in the calling function (its "prefer-vector-width"
    attribute) when the target has AVX-512 F. LLVM prefers 256-bit vectors on Intel AVX-512 cores, which halves
    the throughput of long elementwise loops (a LOGISTIC over 2176 floats: 2.5 -> 1.1 us). Only for loops whose
    every element is computed on its own (maps, no reassociated sums): their results do not depend on the width,
    so every ISA path still gives the same bytes. Read from the features Numba compiles for (part of its cache
    key), not from LITE_NUMBA_ISA."""

    def codegen(context, builder, sig, args):
        if isa.cpu_features().get("avx512f"):
            # llvmlite's attribute set only admits its known keywords; a string attribute is added as it is
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def f32_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the low 32 bits of the integer `bits` (a bitcast, no conversion)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        if bits.bitwidth > 32:
            v = builder.trunc(v, I32)
        elif bits.bitwidth < 32:
            v = builder.sext(v, I32)
        return builder.bitcast(v, F32)

    return types.float32(bits), codegen


@intrinsic
def fdiv(typingctx, a, b):
    """a / b for float32 without Numba's division-by-zero check (which the default error model adds to every
    division, and whose branch stops loop vectorization): IEEE results, inf or NaN for a zero divisor."""
    if a != types.float32 or b != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])

    return types.float32(types.float32, types.float32), codegen


@intrinsic
def f32_bits(typingctx, x):
    """The IEEE bits of the float32 `x` as an int32 (a bitcast, no conversion)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], I32)

    return types.int32(types.float32), codegen


_LOG2E = np.float32(1.44269504)
_LN2_HI = np.float32(0.693359375)  # 355/512: k * _LN2_HI is exact for |k| < 2**15
_LN2_LO = np.float32(-2.12194440e-4)
_EXP_HI = np.float32(88.72283)  # below ln(FLT_MAX) = 88.7228391: exp rounds to a finite float32 up to here


@njit(cache=True, inline="always")
def exp_f32(t):
    """exp(t) for float32 t: ~2e-7 relative error; 0 below -87.3 (where float32's normal range ends), inf above
    88.72283 (the largest float32 whose exp is below FLT_MAX, as the official runtime's exp), NaN for NaN."""
    c = min(max(t, np.float32(-87.3)), _EXP_HI)
    k = np.floor(c * _LOG2E + np.float32(0.5))
    f = c - k * _LN2_HI - k * _LN2_LO
    p = np.float32(1.0 / 720)
    p = p * f + np.float32(1.0 / 120)
    p = p * f + np.float32(1.0 / 24)
    p = p * f + np.float32(1.0 / 6)
    p = p * f + np.float32(0.5)
    p = p * f + np.float32(1.0)
    p = p * f + np.float32(1.0)
    # p * 2**k by adding k to p's exponent bits (p in [0.70, 1.42], biased exponent 126 or 127): the result is a
    # normal float for every c in [-87.3, 88.72283] (k = -126 only with p > 1, k = 128 only with p < 1). Not a
    # product of powers of two: fastmath "reassoc" in a caller (its flags reach inlined operations) turned
    # p * 2**64 * 2**64 into p * 2**128 = inf.
    r = f32_from_bits(f32_bits(p) + (np.int32(k) << 23))
    r = r if t >= np.float32(-87.3) else np.float32(0.0)
    r = r if t <= _EXP_HI else np.float32(np.inf)
    return r if t == t else t


@intrinsic
def fmadd(typingctx, a, b, c):
    """a * b + c for float32 as llvm.fmuladd: one fused multiply-add (one rounding) where the target has FMA (every
    x86 level from avx2 up, NEON), else a multiply and an add. Only for maths that need not match another
    implementation bit for bit (gelu_f32's polynomials): the result's last bit depends on the target."""
    if not (a == b == c == types.float32):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [F32], ir.FunctionType(F32, [F32, F32, F32]))
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


# exp(f) on [-ln2 / 2, ln2 / 2] by a degree-5 polynomial fitted for relative error (Lawson's iteration on Chebyshev
# nodes): 1.35e-7 with these float32 coefficients
_E5 = (np.float32(1.0000001192092896), np.float32(0.9999997019767761), np.float32(0.49998894333839417),
       np.float32(0.16667574644088745), np.float32(0.04191538318991661), np.float32(0.008297654800117016))
_LN2_F = np.float32(0.6931471805599453)


@njit(cache=True, inline="always")
def gelu_f32(v):
    """0.5 v erfc(-v / sqrt(2)), the official GELU's exact form, for float32 v, relative error against float64
    below 2.5e-6 over [-14, 14] (the tail for large negative v included: no cancellation). With h = Phi(-|v|) =
    erfc(|v| / sqrt(2)) / 2 in the module docstring's form, t = 1 / (1 + |v| / (2 sqrt(2))),
    h = t exp(q(t) - ln 2 - v^2 / 2), the result is v (1 - h) for v > 0 and v h otherwise: no NaN test (a NaN v
    gives NaN), +inf gives +inf and -inf NaN as the official kernel. 37 vector operations per vector (46 for
    0.5 v erfc(...) as two functions): ln 2 folded into the polynomial's constant, v^2 / 2 in one fused
    multiply-add, exp's reduction in fused multiply-adds with round-to-nearest and a degree-5 polynomial."""
    t = fdiv(np.float32(1.0), fmadd(abs(v), np.float32(0.35355339059327373), np.float32(1.0)))
    q = fmadd(np.float32(0.17087277), t, np.float32(-0.82215223))
    q = fmadd(q, t, np.float32(1.48851587))
    q = fmadd(q, t, np.float32(-1.13520398))
    q = fmadd(q, t, np.float32(0.27886807))
    q = fmadd(q, t, np.float32(-0.18628806))
    q = fmadd(q, t, np.float32(0.09678418))
    q = fmadd(q, t, np.float32(0.37409196))
    q = fmadd(q, t, np.float32(1.00002368))
    q = fmadd(q, t, np.float32(-1.26551223) - _LN2_F)
    w = fmadd(v * np.float32(-0.5), v, q)  # < -0.66: no overflow side
    c = max(w, np.float32(-87.3))
    k = np.rint(c * _LOG2E)
    f = fmadd(k, -_LN2_HI, c)
    f = fmadd(k, -_LN2_LO, f)
    p = fmadd(_E5[5], f, _E5[4])
    p = fmadd(p, f, _E5[3])
    p = fmadd(p, f, _E5[2])
    p = fmadd(p, f, _E5[1])
    p = fmadd(p, f, _E5[0])
    e = f32_from_bits(f32_bits(p) + (np.int32(k) << 23))  # a normal float: see exp_f32
    h = t * (e if w >= np.float32(-87.3) else np.float32(0.0))
    return v * (np.float32(1.0) - h if v > np.float32(0.0) else h)


@njit(cache=True, inline="always")
def tanh_f32(x):
    """tanh exactly as the official x86 build computes it (TANH, and the sequence ops' ApplyTanhToVector: Eigen's
    ptanh_float with EIGEN_FAST_MATH, no FMA): x clamped to +-7.90738964080810547, then (x + x^3 P(x^2)) / Q(x^2),
    a [9/8] rational minimax, in float32 Horner steps (mul and add separate). Bit-exact with the official TANH on
    1M probes over [-9, 9]."""
    c = np.float32(7.90738964080810547)
    xc = min(max(x, -c), c)
    x2 = xc * xc
    x3 = x2 * xc
    p = np.float32(1.394553628e-8) * x2 + np.float32(2.102733560e-5)
    p = p * x2 + np.float32(3.520756727e-3)
    p = p * x2 + np.float32(1.340216100e-1)
    q = np.float32(8.015776984e-7) * x2 + np.float32(3.326951409e-4)
    q = q * x2 + np.float32(2.597254514e-2)
    q = q * x2 + np.float32(4.673548340e-1)
    q = q * x2 + np.float32(1.0)
    r = fdiv(x3 * p + xc, q)
    return r if x == x else x


@njit(cache=True, inline="always")
def sigmoid_f32(x):
    """The logistic function exactly as the official x86 build computes it (LOGISTIC, and the sequence ops'
    ApplySigmoidToVector: Eigen's scalar_logistic_op<float> packet path, no FMA): 0 below -104; else with
    x' = min(x, 16.6355324) / 2, m = floor(x' log2(e) + 1/2), r = x' - m ln2 (two-part ln2), exp(r) by a degree-5
    minimax polynomial, e = (2^m exp(r))^2 and e / (1 + e), every step in float32. Bit-exact with the official
    LOGISTIC on 1M probes over [-20, 20]. Branch-free (selects), so loops over it vectorize."""
    half = np.float32(0.5)
    xv = max(min(x, np.float32(16.6355324)), np.float32(-104.0)) * half
    m = np.floor(xv * np.float32(1.44269504088896341) + half)
    r = m * np.float32(-0.693359375) + xv
    r = m * np.float32(2.12194440e-4) + r
    r2 = r * r
    p_even = r2 * np.float32(4.1898667812347412109375e-2) + np.float32(0.49999141693115234375)
    p_odd = r2 * np.float32(8.33471305668354034423828125e-3) + np.float32(0.16666877269744873046875)
    p = r * p_odd + p_even
    p = r2 * p + (r + np.float32(1.0))
    # m is in [-75, 12], so 2^m is a normal float32 and the scaling is exact (as ldexp)
    e = p * f32_from_bits((np.int32(m) + 127) << 23)
    e = e * e
    v = fdiv(e, np.float32(1.0) + e)
    v = v if x >= np.float32(-104.0) else np.float32(0.0)
    return v if x == x else x


@njit(cache=True, inline="always")
def eigen_exp_f32(x):
    """exp(x) exactly as the official x86 build's Eigen computes it for a packet (pexp_float, no FMA: every
    multiply-add rounded twice): 0 below -104, x clamped to 88.723, m = floor(x log2(e) + 1/2), r = x - m ln2 (ln2
    in two parts), a degree-6 polynomial in even/odd halves, then 2^m by exponent arithmetic (in two steps, as
    pldexp, so that m = 128 or m < -126 still scale exactly), and max(., x). Bit-exact with the official SOFTMAX's
    exponentials (200,001 probes over [-30, 0]). Branch-free, so loops over it vectorize."""
    xc = min(x, np.float32(88.723))
    m = np.floor(xc * np.float32(1.44269504088896341) + np.float32(0.5))
    r = m * np.float32(-0.693359375) + xc
    r = m * np.float32(2.12194440e-4) + r
    r2 = r * r
    p_even = r2 * np.float32(1.37449637986719608306884765625e-3) + np.float32(4.166965186595916748046875e-2)
    p_odd = r2 * np.float32(8.36894474923610687255859375e-3) + np.float32(0.16666518151760101318359375)
    p_even = r2 * p_even + np.float32(0.49999988079071044921875)
    y = r * p_odd + p_even
    y = r2 * y + (r + np.float32(1.0))
    # pldexp: y * 2^m as y * 2^a * 2^b with a = m >> 1 and b = m - a (each factor a normal float for m in
    # [-151, 128]); m is at most 128 here and below -151 only for results that are 0 anyway
    k = max(np.int32(m), np.int32(-252))
    a = k >> 1
    v = y * f32_from_bits((a + 127) << 23) * f32_from_bits((k - a + 127) << 23)
    v = max(v, x)
    v = v if x >= np.float32(-104.0) else np.float32(0.0)
    return v if x == x else x


def _emit_eigen_sum(builder, ptr, lo, n, base, tf=None):
    """IR of eigen_sum_f32 over the float pointer ptr (see there): returns the float32 sum. tf(builder, value), if
    given, maps each loaded value (a float or a vector of floats) to the value summed."""
    tf = tf or (lambda b, v: v)
    v4, v8 = ir.VectorType(F32, 4), ir.VectorType(F32, 8)
    zero, four = i64(0), i64(4)
    start = builder.srem(builder.sub(four, builder.srem(base, four)), four)
    start = builder.select(builder.icmp_signed("<", n, start), n, start)
    rest = builder.sub(n, start)
    s1 = builder.mul(builder.sdiv(rest, four), four)
    s2 = builder.mul(builder.sdiv(rest, i64(8)), i64(8))
    row = gep(builder, ptr, lo, F32)
    res = cgutils.alloca_once(builder, F32)

    def vload(p0, off, ty):
        return tf(builder, builder.load(builder.bitcast(gep(builder, p0, off, F32), ty.as_pointer()), align=4))

    def add_run(a, b):  # res += row[a:b] in order
        with cgutils.for_range_slice(builder, a, b, i64(1), inc=True) as (i, _):
            builder.store(builder.fadd(builder.load(res), tf(builder, builder.load(gep(builder, row, i, F32)))), res)

    with builder.if_else(builder.icmp_signed("==", s1, zero)) as (few, packets):
        with few:  # fewer than 4 aligned elements: in order
            builder.store(tf(builder, builder.load(row)), res)
            add_run(i64(1), n)
        with packets:
            pk = gep(builder, row, start, F32)
            acc = cgutils.alloca_once_value(builder, vload(pk, zero, v4))
            with builder.if_then(builder.icmp_signed(">", s1, four)):
                a8 = cgutils.alloca_once_value(builder, vload(pk, zero, v8))
                with cgutils.for_range(builder, builder.sdiv(builder.sub(s2, i64(8)), i64(8))) as loop:
                    off = builder.add(i64(8), builder.mul(loop.index, i64(8)))
                    builder.store(builder.fadd(builder.load(a8), vload(pk, off, v8)), a8)
                q8 = builder.load(a8)
                low = builder.shuffle_vector(q8, q8, ir.Constant(ir.VectorType(I32, 4), [0, 1, 2, 3]))
                high = builder.shuffle_vector(q8, q8, ir.Constant(ir.VectorType(I32, 4), [4, 5, 6, 7]))
                builder.store(builder.fadd(low, high), acc)
                with builder.if_then(builder.icmp_signed(">", s1, s2)):
                    builder.store(builder.fadd(builder.load(acc), vload(pk, s2, v4)), acc)
            pv = builder.load(acc)
            lane = [builder.extract_element(pv, ir.Constant(I32, j)) for j in range(4)]
            builder.store(builder.fadd(builder.fadd(lane[0], lane[2]), builder.fadd(lane[1], lane[3])), res)
            add_run(zero, start)
            add_run(builder.add(start, s1), n)
    return builder.load(res)


@intrinsic
def eigen_sum_f32(typingctx, v, lo, n, base):
    """v[lo] + ... + v[lo + n - 1] (n >= 1) summed as Eigen's vectorized redux of a contiguous float32 vector whose
    first element is `base` floats past a 16-byte boundary (SSE packets of 4): from the first aligned element, two
    packet accumulators over pairs of packets (here one 8-lane accumulator holding both, lane by lane the same
    additions), their sum, one more packet if one is left, the horizontal (p0 + p2) + (p1 + p3), then the unaligned
    head and the tail one by one; fewer than 4 aligned elements: in order. v is flat (1-D). An intrinsic, not an
    inlined function: Numba reference-counts an array passed into a function per call, ~20 ns a row."""
    if not (isinstance(v, types.Array) and v.dtype == types.float32 and v.ndim == 1):
        return None
    sig = types.float32(v, types.int64, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        va, lo, n, base = args
        return _emit_eigen_sum(builder, data_ptr(context, builder, sig.args[0], va), lo, n, base)

    return sig, codegen


@intrinsic
def eigen_sum_sq_f32(typingctx, v, lo, n, base, m, clamped):
    """eigen_sum_f32 of the squares the normalization patterns sum, computed as they are loaded (no scratch row):
    (v[i] - m)^2 (SQUARED_DIFFERENCE: the difference rounded, then squared) when `clamped` is False, else v[i]^2
    clamped to FLT_MAX as MUL stores it (a NaN stays NaN). `clamped` is a compile-time boolean."""
    if not (isinstance(v, types.Array) and v.dtype == types.float32 and v.ndim == 1 and m == types.float32
            and isinstance(clamped, types.BooleanLiteral)):
        return None
    sig = types.float32(v, types.int64, types.int64, types.int64, types.float32, clamped)
    clamp = clamped.literal_value

    def codegen(context, builder, sig, args):
        va, lo, n, base, mv, _ = args

        def square(b, val):
            if clamp:
                p = b.fmul(val, val)
                big = ir.Constant(val.type, float(np.finfo(np.float32).max)) if not isinstance(
                    val.type, ir.VectorType) else splat(b, ir.Constant(F32, float(np.finfo(np.float32).max)), val.type)
                return b.select(b.fcmp_ordered(">", p, big), big, p)
            mm = splat(b, mv, val.type) if isinstance(val.type, ir.VectorType) else mv
            t = b.fsub(val, mm)
            return b.fmul(t, t)

        return _emit_eigen_sum(builder, data_ptr(context, builder, sig.args[0], va), lo, n, base, square)

    return sig, codegen


def _emit_row_map(builder, dst, src, n, fn):
    """dst[i] = fn(src[i]) for i < n (float pointers, dst == src allowed; fn maps a float vector; src may be a list
    of pointers, fn then maps the list of their vectors) in vectors of
    16 lanes (8 without AVX-512 F): whole vectors, then one more ending at n; a row of 4 to 15 floats as two
    overlapping vectors of the largest of 8 and 4 lanes that fits; 1 to 3 floats one by one. Every vector a row
    needs is loaded before the first store, so the overlapped lanes are computed from the row's values as they were
    (the same value stored twice): no masked moves, which stall the loads after them, and no scalar remainder."""
    lanes = 16 if isa.cpu_features().get("avx512f") else 8
    done = builder.append_basic_block("map.done")

    def vec(k):
        return ir.VectorType(F32, k).as_pointer()

    srcs = src if isinstance(src, list) else [src]
    f = fn if isinstance(src, list) else (lambda vs: fn(vs[0]))

    def load(off, k):
        return [builder.load(builder.bitcast(gep(builder, p, off, F32), vec(k)), align=4) for p in srcs]

    def store(v, off, k):
        builder.store(f(v), builder.bitcast(gep(builder, dst, off, F32), vec(k)), align=4)

    here, nxt = builder.append_basic_block("map.long"), builder.append_basic_block("map.short")
    builder.cbranch(builder.icmp_signed(">=", n, i64(lanes)), here, nxt)
    builder.position_at_end(here)
    last = builder.sub(n, i64(lanes))
    tail = load(last, lanes)
    with cgutils.for_range(builder, builder.sdiv(builder.add(last, i64(lanes - 1)), i64(lanes))) as loop:
        off = builder.mul(loop.index, i64(lanes))
        store(load(off, lanes), off, lanes)
    store(tail, last, lanes)
    builder.branch(done)
    builder.position_at_end(nxt)
    k = lanes // 2
    while k >= 4:
        here, nxt = builder.append_basic_block(f"map.{k}"), builder.append_basic_block(f"map.lt{k}")
        builder.cbranch(builder.icmp_signed(">=", n, i64(k)), here, nxt)
        builder.position_at_end(here)
        last = builder.sub(n, i64(k))
        first, tail = load(i64(0), k), load(last, k)
        store(first, i64(0), k)
        store(tail, last, k)
        builder.branch(done)
        builder.position_at_end(nxt)
        k //= 2
    with cgutils.for_range(builder, n) as loop:
        store(load(loop.index, 1), loop.index, 1)
    builder.branch(done)
    builder.position_at_end(done)


def _flat_f32(*arrays) -> bool:
    return all(isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == 1 for a in arrays)


@intrinsic
def row_shift_scale_f32(typingctx, out, x, lo, n, m, b):
    """out[lo + i] = (x[lo + i] - m) * b for i < n (flat float32 arrays, distinct or the same; each step rounded as
    the scalar expression): _emit_row_map's vectors."""
    if not (_flat_f32(out, x) and m == types.float32 and b == types.float32):
        return None
    sig = types.none(out, x, types.int64, types.int64, types.float32, types.float32)

    def codegen(context, builder, sig, args):
        ov, xv, lo_, n_, m_, b_ = args
        dst = gep(builder, data_ptr(context, builder, sig.args[0], ov), lo_, F32)
        src = gep(builder, data_ptr(context, builder, sig.args[1], xv), lo_, F32)
        _emit_row_map(builder, dst, src, n_,
                      lambda v: builder.fmul(builder.fsub(v, splat(builder, m_, v.type)), splat(builder, b_, v.type)))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def row_scale_f32(typingctx, out, lo, n, s):
    """out[lo + i] *= s for i < n (a flat float32 array): _emit_row_map's vectors."""
    if not (_flat_f32(out) and s == types.float32):
        return None
    sig = types.none(out, types.int64, types.int64, types.float32)

    def codegen(context, builder, sig, args):
        ov, lo_, n_, s_ = args
        row = gep(builder, data_ptr(context, builder, sig.args[0], ov), lo_, F32)
        _emit_row_map(builder, row, row, n_, lambda v: builder.fmul(v, splat(builder, s_, v.type)))
        return context.get_dummy_value()

    return sig, codegen


def _fin(builder, v):
    """v clamped to [-FLT_MAX, FLT_MAX] as ADD / SUB / MUL store it (Numba's min(max(v, -M), M): a NaN stays)."""
    big = splat(builder, ir.Constant(F32, float(np.finfo(np.float32).max)), v.type)
    neg = splat(builder, ir.Constant(F32, float(-np.finfo(np.float32).max)), v.type)
    v = builder.select(builder.fcmp_ordered(">", neg, v), neg, v)
    return builder.select(builder.fcmp_ordered("<", big, v), big, v)


@intrinsic
def norm_row_f32(typingctx, out, x, w, lo, n, kind, r, c):
    """One output row of norm_fusion's patterns, out[lo + i] for i < n from x[lo + i] and w[i] (flat float32
    arrays), every step rounded and clamped as the pattern's node stores it: kind 0 (mean_shift, c = its b)
    fin(fin(x r) + c); kind 1 (gamma, c = -mean) g = fin(r w), fin(fin(x g) + fin(c g)); kind 2 (rms)
    fin(fin(x r) w). _emit_row_map's vectors, so a row of 32 floats does not run scalar."""
    if not (_flat_f32(out, x, w) and r == types.float32 and c == types.float32
            and isinstance(kind, types.Integer)):
        return None
    sig = types.none(out, x, w, types.int64, types.int64, kind, types.float32, types.float32)

    def codegen(context, builder, sig, args):
        ov, xv, wv, lo_, n_, kind_, r_, c_ = args
        dst = gep(builder, data_ptr(context, builder, sig.args[0], ov), lo_, F32)
        xs = gep(builder, data_ptr(context, builder, sig.args[1], xv), lo_, F32)
        ws = data_ptr(context, builder, sig.args[2], wv)
        b = builder

        def shift(vs):
            xr = _fin(b, b.fmul(vs[0], splat(b, r_, vs[0].type)))
            return _fin(b, b.fadd(xr, splat(b, c_, vs[0].type)))

        def gamma(vs):
            g = _fin(b, b.fmul(splat(b, r_, vs[0].type), vs[1]))
            return _fin(b, b.fadd(_fin(b, b.fmul(vs[0], g)), _fin(b, b.fmul(splat(b, c_, g.type), g))))

        def rms(vs):
            return _fin(b, b.fmul(_fin(b, b.fmul(vs[0], splat(b, r_, vs[0].type))), vs[1]))

        done = builder.append_basic_block("norm.done")
        switch = builder.switch(kind_, done)
        for k, fn in enumerate((shift, gamma, rms)):
            block = builder.append_basic_block(f"norm.{k}")
            switch.add_case(ir.Constant(kind_.type, k), block)
            builder.position_at_end(block)
            _emit_row_map(builder, dst, [xs, ws], n_, fn)
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def row_max_f32(typingctx, v, lo, n):
    """max(v[lo:lo + n]) (n >= 1) in 16 lanes, each keeping x when x > its current value (a NaN never wins; a NaN
    first element, every lane's start, stays): the result is v[lo] when that is NaN, else the largest non-NaN value.
    An intrinsic for the reason eigen_sum_f32 is one."""
    if not (isinstance(v, types.Array) and v.dtype == types.float32 and v.ndim == 1):
        return None
    sig = types.float32(v, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        va, lo, n = args
        lanes = 16
        vt = ir.VectorType(F32, lanes)
        row = gep(builder, data_ptr(context, builder, sig.args[0], va), lo, F32)
        first = builder.load(row)
        acc = cgutils.alloca_once_value(builder, splat(builder, first, vt))

        def keep_max(m, x):
            return builder.select(builder.fcmp_ordered(">", x, m), x, m)

        with cgutils.for_range(builder, builder.sdiv(n, i64(lanes))) as loop:
            p = builder.bitcast(gep(builder, row, builder.mul(loop.index, i64(lanes)), F32), vt.as_pointer())
            builder.store(keep_max(builder.load(acc), builder.load(p, align=4)), acc)
        m = builder.load(acc)
        width = lanes
        while width > 1:  # halves folded with the same rule
            width //= 2
            idx = ir.VectorType(I32, width)
            a = builder.shuffle_vector(m, m, ir.Constant(idx, list(range(width))))
            b = builder.shuffle_vector(m, m, ir.Constant(idx, list(range(width, 2 * width))))
            m = keep_max(a, b)
        res = cgutils.alloca_once_value(builder, builder.extract_element(m, ir.Constant(I32, 0)))
        tail = builder.mul(builder.sdiv(n, i64(lanes)), i64(lanes))
        with cgutils.for_range_slice(builder, tail, n, i64(1), inc=True) as (i, _):
            builder.store(keep_max(builder.load(res), builder.load(gep(builder, row, i, F32))), res)
        return builder.load(res)

    return sig, codegen


@njit(cache=True, inline="always")
def eigen_exp_normalize(v, rows, n, align):
    """The official float SOFTMAX after its shift: over the flat v (rows of n floats, row r at r * n, each already
    (x - max) * beta), exp as Eigen's one linear assignment over the whole block (eigen_exp_f32 in packets, libm's
    expf for the last size % 4), then each row times the inverse of its packet sum (eigen_sum_f32, the row's
    alignment r * align floats past the block's start: its place in the tensor SOFTMAX wrote)."""
    size = rows * n
    tail = size - size % 4
    for i in range(tail):
        v[i] = eigen_exp_f32(v[i])
    for i in range(tail, size):
        v[i] = np.float32(np.exp(v[i]))
    for r in range(rows):
        row_scale_f32(v, r * n, n, fdiv(np.float32(1.0), eigen_sum_f32(v, r * n, n, r * align)))
