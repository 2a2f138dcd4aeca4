"""Intel AMX (Advanced Matrix Extensions) from Numba: the tile state asked of Linux, the tile configuration, and the
inline-assembly intrinsics the int8 tile engine (kernels/linear/simd_amx.py) is built from.

Three things make the tiles usable from a Numba kernel (the spike: ../shared/spikes/amx_int8_tiles.py):

1. Linux hands the 8 KiB of tile data to a process only on request: ``arch_prctl(ARCH_REQ_XCOMP_PERM,
   XFEATURE_XTILEDATA)``, once per process (threads started later inherit it). Without it the first tile
   instruction kills the process (SIGILL), so the ``amx`` level of kernels/base/isa.py needs the grant besides the
   CPU flags: ``isa.refusal()`` asks once (without Numba) and says why not (a kernel without AMX support, a seccomp
   filter, a hypervisor that hides XTILEDATA); the level in force is then ``avx512vnni``, and ``lite-numba
   inspect`` and the benchmark report print the reason.
2. LLVM assembles inline assembly only once llvmlite's native asm parser is initialised (done on import here).
3. Tile shapes come from a 64-byte configuration loaded by ``ldtilecfg`` (palette 1; bytes per row of tile t at
   16 + 2t, rows at 48 + t). Every kernel here uses one shape for all 8 tiles, 16 rows x 64 bytes
   (``tile_config()``): tiles 0-3 accumulate a 2 x 2 block of 16 x 16 int32, 4-5 hold A (16 rows x 64 k-bytes),
   6-7 hold B in the VNNI layout (16 groups of 4 k-bytes x 16 columns: B[k / 4][4n + k % 4]).

The configuration is per thread and other libraries in the process (XNNPACK, oneDNN) load their own and release the
tiles: a driver loads ours when it starts (``load_config``) and releases the tiles when it ends (``release``), so
each worker of a parallel driver configures its own and a context switch after the driver saves no tile data.

The block intrinsic (``make_block``) computes C[16 ma, 16 nb] (int32) = sum over nrun runs of ksteps 64-byte steps
of A . B with TDPBSSD (signed x signed bytes): A tile i reads 16 rows at a + i * a2 + u * rstride + s * 64 + r * lda
(run u, step s, row r), B its nb tiles of 1 KiB at b + ((u * ksteps + s) * nb + j) * 1024, and stores C with rows of
128 bytes (32 int32); with load, C starts from the block in memory instead of zero. The pointers are copied into
clobbered registers before the asm changes them (an input operand must not be modified)."""

from __future__ import annotations

import llvmlite.binding as llb
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

llb.initialize_native_asmparser()

TILE_ROWS = 16  # rows of every tile (A rows, C rows, B groups of 4 k-bytes)
TILE_BYTES = 64  # bytes per tile row: 64 k-bytes of A, 16 columns x 4 k-bytes of B, 16 int32 of C
C_STRIDE = 128  # bytes per row of the C scratch (2 tiles of 16 int32 side by side)


def tile_config() -> np.ndarray:
    """The 64-byte tile configuration every AMX kernel here loads: palette 1, 8 tiles of 16 rows x 64 bytes."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    cfg[16:32].view(np.uint16)[:8] = TILE_BYTES
    cfg[48:56] = TILE_ROWS
    return cfg


@njit(cache=True, inline="always")
def fill_config(cb):
    """tile_config's 64 bytes written into the uint8 array cb (inside a kernel, before load_config)."""
    for i in range(64):
        cb[i] = 0
    cb[0] = 1
    for t in range(8):
        cb[16 + 2 * t] = TILE_BYTES
        cb[48 + t] = TILE_ROWS


def _address(context, builder, ty, val):
    """The data pointer of a Numba array value as an i64."""
    ary = context.make_array(ty)(context, builder, val)
    return builder.ptrtoint(ary.data, ir.IntType(64))


def _asm(builder, text: str, args, clobbers: str) -> None:
    i64 = ir.IntType(64)
    fty = ir.FunctionType(ir.VoidType(), [i64] * len(args))
    constraints = ",".join(["r"] * len(args) + [c for c in clobbers.split(",") if c])
    builder.call(ir.InlineAsm(fty, text, constraints, side_effect=True), list(args))


@intrinsic
def load_config(typingctx, cfg):
    """ldtilecfg from the first 64 bytes of the array cfg (tile_config's bytes, any dtype)."""
    if not isinstance(cfg, types.Array):
        return None

    def codegen(context, builder, sig, args):
        _asm(builder, "ldtilecfg ($0)", [_address(context, builder, sig.args[0], args[0])], "~{memory}")
        return context.get_dummy_value()

    return types.void(cfg), codegen


@intrinsic
def release(typingctx):
    """tilerelease: the tiles back to their initial state (unconfigured; nothing for a context switch to save)."""

    def codegen(context, builder, sig, args):
        _asm(builder, "tilerelease", [], "~{memory}")
        return context.get_dummy_value()

    return types.void(), codegen


def block_asm(ma: int, nb: int, op: str = "tdpbssd", load: bool = False) -> str:
    """The assembly of make_block(ma, nb, op, load): operands $0 a, $1 lda, $2 rstride, $3 nrun << 32 | ksteps,
    $4 b, $5 c, $6 a2 (the byte offset of A tile 1 from A tile 0). Seven operands and seven clobbered registers:
    all that x86-64 has besides the stack and frame pointers."""
    accs = [(i, j) for i in range(ma) for j in range(nb)]
    lines = []
    if load:  # accumulate onto the C block in memory (a partial sum over earlier steps)
        lines += ["mov $5, %r11", f"mov $${C_STRIDE}, %rcx"]
        for i, j in accs:
            if i == 1 and j == 0:
                lines += [f"add $${TILE_ROWS * C_STRIDE}, %r11"]
            lines += [f"tileloadd {64 * j}(%r11,%rcx,1), %tmm{2 * i + j}"]
    else:
        lines += [f"tilezero %tmm{2 * i + j}" for i, j in accs]
    lines += ["mov $0, %r8", "mov $4, %r9", "mov $3, %r10", "shr $$32, %r10", "mov $$64, %rcx",
              "1:", "mov %r8, %r11", "movl ${3:k}, %r12d",
              "2:", "tileloadd (%r11,$1,1), %tmm4"]
    if ma == 2:
        lines += ["lea (%r11,$6,1), %rax", "tileloadd (%rax,$1,1), %tmm5"]
    lines += ["tileloadd (%r9,%rcx,1), %tmm6"]
    if nb == 2:
        lines += ["tileloadd 1024(%r9,%rcx,1), %tmm7"]
    lines += [f"{op} %tmm{6 + j}, %tmm{4 + i}, %tmm{2 * i + j}" for i, j in accs]
    lines += ["add $$64, %r11", f"add $${1024 * nb}, %r9", "dec %r12", "jnz 2b",
              "add $2, %r8", "dec %r10", "jnz 1b",
              "mov $5, %r11", f"mov $${C_STRIDE}, %rcx"]
    for i, j in accs:
        if i == 1 and j == 0:
            lines += [f"add $${TILE_ROWS * C_STRIDE}, %r11"]
        lines += [f"tilestored %tmm{2 * i + j}, {64 * j}(%r11,%rcx,1)"]
    return "\n".join(lines)


def make_block(ma: int, nb: int, op: str = "tdpbssd", load: bool = False):
    """An intrinsic block(a, lda, rstride, nrun, ksteps, b, c, a2) computing the C block of ma x nb tiles (module
    docstring; A tile 1 at a + a2 rather than a + 16 lda, so its rows may be another output row's pixels): a and b
    are byte addresses (int64), c an int32 array (rows of C_STRIDE bytes); nrun, ksteps >= 1. load: the products
    are added to the block already in c (a sum over earlier steps) instead of starting from zero."""
    text = block_asm(ma, nb, op, load)

    @intrinsic
    def block(typingctx, a, lda, rstride, nrun, ksteps, b, c, a2):
        if not isinstance(c, types.Array):
            return None
        i64 = types.int64
        sig = types.void(i64, i64, i64, i64, i64, i64, c, i64)

        def codegen(context, builder, sig, args):
            a, lda, rstride, nrun, ksteps, b, c, a2 = args
            runs_steps = builder.or_(builder.shl(nrun, ir.Constant(ir.IntType(64), 32)), ksteps)
            vals = [a, lda, rstride, runs_steps, b, _address(context, builder, sig.args[6], c), a2]
            _asm(builder, text, vals, "~{rax},~{rcx},~{r8},~{r9},~{r10},~{r11},~{r12},~{memory},~{cc}")
            return context.get_dummy_value()

        return sig, codegen

    return block
