"""Flex linear algebra: Einsum (any equation of one or two operands: contractions, batch and broadcast labels,
ellipsis, diagonals, sums), MatrixInverse, MatrixDeterminant, Cholesky.

Einsum is planned in prepare: each output element and each step of the summation gets a precomputed element
offset into every operand, so the kernel is one gather-multiply-accumulate loop (float64 accumulation, rounded
once). The matrix factorizations work in float64 per matrix (partial-pivot LU; Cholesky-Banachiewicz), which is
at least as accurate as TensorFlow's float32 Eigen kernels; singular / non-positive-definite inputs raise
TensorFlow's error texts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .nodedef import FlexNode

_FLOATS = (np.float32, np.float64)


# --- Einsum -------------------------------------------------------------------------------------------------------

def _parse_einsum(ctx, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand label strings and the output labels, with `...` replaced by upper-case labels (right-aligned)."""
    eq = equation.replace(" ", "")
    ctx.check("->" in eq, f"Einsum equation {equation!r} has no '->' (implicit output is not supported)")
    lhs, rhs = eq.split("->")
    terms = lhs.split(",")
    ctx.check(len(terms) == len(ranks), f"Einsum equation {equation!r} names {len(terms)} operands, the node has "
                                        f"{len(ranks)}")
    ell_rank = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            ell_rank = max(ell_rank, r - (len(t) - 3))
    ell = "".join(chr(ord("A") + i) for i in range(ell_rank))
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - (len(t) - 3)
            ctx.check(n >= 0, f"Einsum operand {t!r} has rank {r}, fewer than its labels")
            t = t.replace("...", ell[ell_rank - n:])
        ctx.check(len(t) == r and (t.isalpha() or t == ""), f"Einsum operand labels {t!r} do not match its rank {r}")
        out_terms.append(t)
    rhs = rhs.replace("...", ell)
    ctx.check(rhs.isalpha() or rhs == "", f"Einsum output labels {rhs!r} are not letters")
    return out_terms, rhs


def _offsets(dims: list[int], strides: list[int]) -> np.ndarray:
    """Element offsets of every point of the grid `dims` (row-major) given a stride per grid dimension."""
    off = np.zeros(1, np.int64)
    for n, s in zip(dims, strides):
        off = (off[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).reshape(-1)
    return off


@njit(cache=True, nogil=True)
def einsum2(a, b, out, fa, fb, sa, sb):
    """out[o] = sum_s a[fa[o] + sa[s]] * b[fb[o] + sb[s]] (float64 accumulation)."""
    for o in range(out.size):
        acc = 0.0
        pa = fa[o]
        pb = fb[o]
        for s in range(sa.size):
            acc += np.float64(a[pa + sa[s]]) * np.float64(b[pb + sb[s]])
        out[o] = acc


@njit(cache=True, nogil=True)
def einsum1(a, out, fa, sa):
    """out[o] = sum_s a[fa[o] + sa[s]]."""
    for o in range(out.size):
        acc = 0.0
        pa = fa[o]
        for s in range(sa.size):
            acc += np.float64(a[pa + sa[s]])
        out[o] = acc


def _einsum(ctx, node: FlexNode) -> None:
    ctx.check(ctx.num_inputs in (1, 2), f"Einsum with {ctx.num_inputs} operands is not supported (1 or 2)")
    ops = [ctx.input(i) for i in range(ctx.num_inputs)]
    for t in ops:
        ctx.check_dtype(t, *_FLOATS)
        ctx.check_dtype(t, ops[0].dtype)
    equation = node.attr("equation", b"", "s").decode("utf-8", "replace")
    terms, rhs = _parse_einsum(ctx, equation, [t.ndim for t in ops])
    sizes: dict[str, int] = {}
    for t, labels in zip(ops, terms):
        for lab, n in zip(labels, t.shape):
            # a label of size 1 broadcasts against the same label elsewhere (ellipsis dimensions)
            if sizes.get(lab, 1) == 1 or n == sizes[lab] or n == 1:
                sizes[lab] = max(sizes.get(lab, 1), n)
            else:
                ctx.fail(f"Einsum {equation!r}: label {lab!r} has sizes {sizes[lab]} and {n}")
    for lab in rhs:
        ctx.check(lab in sizes, f"Einsum {equation!r}: output label {lab!r} is in no operand")
    ctx.check(len(set(rhs)) == len(rhs), f"Einsum {equation!r}: repeated output label")
    summed = sorted(set("".join(terms)) - set(rhs))
    out = ctx.set_output(0, tuple(sizes[lab] for lab in rhs), ops[0].dtype)
    if out.size == 0:
        return
    strides = []
    for t, labels in zip(ops, terms):
        st: dict[str, int] = {}
        acc = 1
        for k in range(len(labels) - 1, -1, -1):
            if t.shape[k] != 1:  # broadcast dimensions keep stride 0
                st[labels[k]] = st.get(labels[k], 0) + acc  # a repeated label walks the diagonal
            acc *= t.shape[k]
        strides.append(st)
    free_dims = [sizes[lab] for lab in rhs]
    sum_dims = [sizes[lab] for lab in summed]
    free = [_offsets(free_dims, [st.get(lab, 0) for lab in rhs]) for st in strides]
    sums = [_offsets(sum_dims, [st.get(lab, 0) for lab in summed]) for st in strides]
    flat = [ctx.view(t, (t.size,)) if t.size else np.zeros(1, t.dtype) for t in ops]
    o = ctx.view(out, (out.size,))
    if len(ops) == 2:
        ctx.call(einsum2, flat[0], flat[1], o, free[0], free[1], sums[0], sums[1])
    else:
        ctx.call(einsum1, flat[0], o, free[0], sums[0])


# --- matrix factorizations ----------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _lu(m, piv):
    """In-place partial-pivot LU of the float64 square matrix m; returns the permutation sign, 0 if singular."""
    n = m.shape[0]
    sign = 1.0
    for k in range(n):
        p = k
        best = abs(m[k, k])
        for i in range(k + 1, n):
            if abs(m[i, k]) > best:
                best = abs(m[i, k])
                p = i
        piv[k] = p
        if best == 0.0:
            return 0.0
        if p != k:
            sign = -sign
            for j in range(n):
                m[k, j], m[p, j] = m[p, j], m[k, j]
        for i in range(k + 1, n):
            f = m[i, k] / m[k, k]
            m[i, k] = f
            for j in range(k + 1, n):
                m[i, j] -= f * m[k, j]
    return sign


@njit(cache=True, nogil=True)
def matrix_determinant(x, out, m, piv):
    """x: [B, n, n]; out: [B]; m: float64 [n, n] scratch, piv: int64 [n]."""
    n = x.shape[1]
    for b in range(x.shape[0]):
        for i in range(n):
            for j in range(n):
                m[i, j] = x[b, i, j]
        d = _lu(m, piv)
        for i in range(n):
            d *= m[i, i]
        out[b] = d


@njit(cache=True, nogil=True)
def matrix_inverse(x, out, adjoint, m, piv, col):
    """x, out: [B, n, n]; inverse (of the transpose if adjoint) by LU and n triangular solves."""
    n = x.shape[1]
    for b in range(x.shape[0]):
        for i in range(n):
            for j in range(n):
                m[i, j] = x[b, j, i] if adjoint else x[b, i, j]
        if _lu(m, piv) == 0.0:
            raise ValueError("Input is not invertible.")
        for c in range(n):
            for i in range(n):
                col[i] = 1.0 if i == c else 0.0
            for k in range(n):  # apply the row swaps in order
                p = piv[k]
                col[k], col[p] = col[p], col[k]
            for i in range(n):  # L y = P e_c (unit diagonal)
                s = col[i]
                for k in range(i):
                    s -= m[i, k] * col[k]
                col[i] = s
            for i in range(n - 1, -1, -1):  # U x = y
                s = col[i]
                for k in range(i + 1, n):
                    s -= m[i, k] * col[k]
                col[i] = s / m[i, i]
            for i in range(n):
                out[b, i, c] = col[i]


@njit(cache=True, nogil=True)
def cholesky(x, out, m):
    """x, out: [B, n, n]; lower-triangular L with L L^T = x (the lower triangle of x is read)."""
    n = x.shape[1]
    for b in range(x.shape[0]):
        for i in range(n):
            for j in range(n):
                m[i, j] = 0.0
        for i in range(n):
            for j in range(i + 1):
                s = np.float64(x[b, i, j])
                for k in range(j):
                    s -= m[i, k] * m[j, k]
                if i == j:
                    if not s > 0.0:
                        raise ValueError("Cholesky decomposition was not successful. The input might not be valid.")
                    m[i, i] = np.sqrt(s)
                else:
                    m[i, j] = s / m[j, j]
        for i in range(n):
            for j in range(n):
                out[b, i, j] = m[i, j]


def _square_batch(ctx) -> tuple:
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, *_FLOATS)
    ctx.check(x.ndim >= 2 and x.shape[-1] == x.shape[-2], f"input must be a batch of square matrices, got shape "
                                                          f"{list(x.shape)}")
    n = x.shape[-1]
    return x, n, int(np.prod(x.shape[:-2]))


def _matrix_determinant(ctx, node: FlexNode) -> None:
    x, n, batch = _square_batch(ctx)
    out = ctx.set_output(0, x.shape[:-2], x.dtype)
    if out.size:
        ctx.call(matrix_determinant, ctx.view(x, (batch, n, n)), ctx.view(out, (batch,)),
                 ctx.temp((n, n), np.float64), ctx.temp((max(n, 1),), np.int64))


def _matrix_inverse(ctx, node: FlexNode) -> None:
    x, n, batch = _square_batch(ctx)
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size:
        ctx.call(matrix_inverse, ctx.view(x, (batch, n, n)), ctx.view(out, (batch, n, n)),
                 node.attr("adjoint", False, "b"), ctx.temp((n, n), np.float64), ctx.temp((n,), np.int64),
                 ctx.temp((n,), np.float64))


def _cholesky(ctx, node: FlexNode) -> None:
    x, n, batch = _square_batch(ctx)
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size:
        ctx.call(cholesky, ctx.view(x, (batch, n, n)), ctx.view(out, (batch, n, n)), ctx.temp((n, n), np.float64))


OPS = {"Einsum": _einsum, "MatrixInverse": _matrix_inverse, "MatrixDeterminant": _matrix_determinant,
       "Cholesky": _cholesky}
