"""Calling a compiled kernel through its native entry address, from generated runners.

`call_native(addr, args, sigstr)` calls the Numba-compiled function at `addr` (an int64: the address of the
function Numba compiled for a dispatcher overload, in Numba's own calling convention, not the C one) with the
tuple `args`, and propagates an exception the callee raised (its status and exception info) exactly as a direct
call would. The runner therefore contains no kernel code: it is compiled once per graph *structure*, and kernels
are compiled and cached on their own.

`sigstr` is a string constant spelling the argument types the overload at `addr` was compiled for (`sig_string`);
typing fails unless the arguments have exactly those types, so that a runner can never call a function with other
types than its own (which would read memory wrongly rather than raise). It costs nothing at run time.

`native_address(dispatcher, sig)` returns the address of an overload (compiling or loading it if needed).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic


def sig_string(argtypes) -> str:
    return "|".join(str(t) for t in argtypes)


@intrinsic
def call_native(typingctx, addr, args, sigstr):
    if not isinstance(addr, types.Integer) or not isinstance(args, types.BaseTuple):
        return None
    if not isinstance(sigstr, types.StringLiteral):
        raise TypingError("call_native: the signature must be a string constant")
    got = sig_string(args.types)
    if got != sigstr.literal_value:
        raise TypingError(f"call_native: the runner passes ({got}) but the kernel was compiled for "
                          f"({sigstr.literal_value})")
    argtys = tuple(args.types)

    def codegen(context, builder, sig, llargs):
        addr_v, tup, _ = llargs
        vals = cgutils.unpack_tuple(builder, tup, len(argtys))
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fnptr = builder.inttoptr(addr_v, fnty.as_pointer())
        if not hasattr(fnptr, "function_type"):  # what call_function reads from an ir.Function
            fnptr.function_type = fnty
        status, _ = context.call_conv.call_function(builder, fnptr, types.none, argtys, vals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(addr, args, sigstr), codegen


def native_address(cres) -> int:
    """The native entry address of a compile result (a dispatcher overload) that returns None."""
    if cres.objectmode or cres.signature.return_type != types.none:
        raise TypeError("native_address: only nopython kernels returning None")
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
