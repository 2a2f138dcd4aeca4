"""Calling a compiled kernel through its native entry address, from generated runners.

`call_native_at(arena, aux, it, ft, fp, ib, fb, spec)` calls the Numba-compiled function whose address is `fp[i]`
(the function Numba compiled for one dispatcher overload, in Numba's own calling convention, not the C one) and
propagates an exception it raised (status and exception info) exactly as a direct call would. `spec` is a string
constant: the index i, then each argument, its positions p relative to the bases ib (in `it`) and fb (in `ft`),
integers known at run time:

    A<base><p>:<dtype>:<ndim>  a C-contiguous array over `arena` (base a) or `aux` (base x) at byte offset
                               it[ib + p], with shape it[ib + p + 2 : ib + p + 2 + ndim] (it[ib + p + 1] is its end,
                               unused here)
    i<p>                       the int64 it[ib + p]
    f<p>                       the float64 ft[fb + p]

e.g. "3;Aa0:float32:2;Ax5:int64:1;i8;f0". The codegen builds each array's struct directly (data pointer, shape,
strides; no meminfo) instead of slicing, viewing and reshaping (whose checks and helpers made up most of a runner's
code), and `spec_types(spec)` gives the argument types the kernel must
have been compiled for: the runner and the address agree by construction. The runner therefore contains no
kernel code and only a few instructions per argument: it is compiled once per graph *structure*, and kernels are
compiled and cached on their own. With the bases read at run time, the runner's step loop (codegen._step_loop)
makes every call of the same kernel with the same argument layout from one call site.

No meminfo: the arena and aux outlive every call (the runtime holds them) and a kernel keeps no array after it
returns (kernels return None and store nothing), so the arrays need no reference counting. With the base's meminfo
borrowed, every view, reshape or slice inside a kernel did an atomic increment and decrement on it (NRT_incref /
NRT_decref, `lock incq`): a perf profile of a 1-pixel int8 1x1 convolution (qconv_vnni, ~480 ns a call) put 70 % of
its time there. With a NULL meminfo NRT's functions return at once. microWakeWord hey_jarvis 8.0 -> 4.9 us per
invoke, ViT-tiny dynamic-range 52.6 -> 42.1 us (Xeon model 167, amx).

`native_address(cres)` returns the address of an overload.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import from_dtype, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array


def parse_spec(spec: str):
    """spec -> (fp index, [(kind, base, p, numba dtype or None, ndim)])."""
    head, *parts = spec.split(";")
    args = []
    for a in parts:
        if a[0] == "A":
            loc, dt, nd = a[1:].split(":")
            args.append(("A", loc[0], int(loc[1:]), from_dtype(np.dtype(dt)), int(nd)))
        else:
            args.append((a[0], None, int(a[1:]), None, 0))
    return int(head), args


def spec_types(spec: str) -> tuple:
    """The argument types a kernel called with `spec` gets."""
    out = []
    for kind, _, _, dt, nd in parse_spec(spec)[1]:
        out.append(types.Array(dt, nd, "C") if kind == "A" else types.int64 if kind == "i" else types.float64)
    return tuple(out)


@intrinsic
def call_native_at(typingctx, arena, aux, it, ft, fp, ib, fb, spec):
    if not isinstance(spec, types.StringLiteral):
        raise TypingError("call_native_at: the spec must be a string constant")
    for t in (arena, aux):
        if not (isinstance(t, types.Array) and t.ndim == 1 and t.dtype == types.uint8 and t.layout == "C"):
            raise TypingError("call_native_at: arena and aux must be contiguous uint8 vectors")
    if not (isinstance(ib, types.Integer) and isinstance(fb, types.Integer)):
        raise TypingError("call_native_at: the bases must be integers")
    fi, parsed = parse_spec(spec.literal_value)
    argtys = spec_types(spec.literal_value)
    i64 = ir.IntType(64)

    def codegen(context, builder, sig, llargs):
        arena_v, aux_v, it_v, ft_v, fp_v, ib_v, fb_v, _ = llargs
        arrays = {"a": context.make_array(sig.args[0])(context, builder, value=arena_v),
                  "x": context.make_array(sig.args[1])(context, builder, value=aux_v)}
        itd = builder.gep(context.make_array(sig.args[2])(context, builder, value=it_v).data,
                          [context.cast(builder, ib_v, sig.args[5], types.int64)])
        ftd = builder.gep(context.make_array(sig.args[3])(context, builder, value=ft_v).data,
                          [context.cast(builder, fb_v, sig.args[6], types.int64)])
        fpd = context.make_array(sig.args[4])(context, builder, value=fp_v).data

        def load(data, p):
            return builder.load(builder.gep(data, [ir.Constant(i64, p)]))

        vals = []
        for (kind, base, p, dt, nd), aty in zip(parsed, argtys):
            if kind == "i":
                vals.append(load(itd, p))
            elif kind == "f":
                vals.append(load(ftd, p))
            else:
                b = arrays[base]
                llty = context.get_data_type(dt)
                data = builder.bitcast(builder.gep(b.data, [load(itd, p)]), llty.as_pointer())
                shape = [load(itd, p + 2 + j) for j in range(nd)]
                itemsize = context.get_abi_sizeof(llty)
                strides = [ir.Constant(i64, itemsize)]
                for j in range(nd - 1, 0, -1):
                    strides.insert(0, builder.mul(strides[0], shape[j]))
                out = context.make_array(aty)(context, builder)
                populate_array(out, data=data, shape=shape, strides=strides, itemsize=ir.Constant(i64, itemsize),
                               meminfo=ir.Constant(b.meminfo.type, None))
                vals.append(out._getvalue())
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fnptr = builder.inttoptr(load(fpd, fi), fnty.as_pointer())
        if not hasattr(fnptr, "function_type"):  # what call_function reads from an ir.Function
            fnptr.function_type = fnty
        status, _ = context.call_conv.call_function(builder, fnptr, types.none, argtys, vals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(arena, aux, it, ft, fp, ib, fb, spec), codegen


def native_address(cres) -> int:
    """The native entry address of a compile result (a dispatcher overload) that returns None."""
    if cres.objectmode or cres.signature.return_type != types.none:
        raise TypeError("native_address: only nopython kernels returning None")
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)


@intrinsic
def load_at(typingctx, addr, kind):
    """The scalar of numpy type `kind` at an integer address (a plain load: no array, so no reference counting)."""
    if not isinstance(addr, types.Integer) or not isinstance(kind, types.NumberClass):
        raise TypingError("load_at: an integer address and a numpy scalar type")
    ty = kind.instance_type

    def codegen(context, builder, sig, args):
        return builder.load(builder.inttoptr(args[0], context.get_value_type(ty).as_pointer()))

    return ty(addr, kind), codegen


@intrinsic
def store_at(typingctx, addr, value):
    """Store a scalar at an integer address, as its own type (a plain store: no array)."""
    if not isinstance(addr, types.Integer) or not isinstance(value, (types.Integer, types.Float)):
        raise TypingError("store_at: an integer address and a number")

    def codegen(context, builder, sig, args):
        builder.store(args[1], builder.inttoptr(args[0], context.get_value_type(value).as_pointer()))
        return context.get_dummy_value()

    return types.none(addr, value), codegen


@intrinsic
def word_at(typingctx, base, i):
    """The int64 at position i of the int64 table at address `base` (a plain load: no array)."""
    if not isinstance(base, types.Integer) or not isinstance(i, types.Integer):
        raise TypingError("word_at: an integer address and position")

    def codegen(context, builder, sig, args):
        b, k = (context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args))
        i64 = ir.IntType(64)
        return builder.load(builder.inttoptr(builder.add(b, builder.mul(k, i64(8))), i64.as_pointer()))

    return types.int64(base, i), codegen
