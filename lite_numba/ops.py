"""The kernel contract shared by builtin and custom ops, and the @custom_op decorator.

A kernel is an `OpKernel`: `init(options) -> state` and `free(state)` run in Python once per node; `prepare(ctx)`
runs in Python whenever input shapes change. Prepare validates inputs (raise with `ctx.fail`), sets every output's
shape, and schedules the maths with `ctx.call(fn, *args)`: `fn` is an `@njit(cache=True, nogil=True)` function over
numpy arrays and scalars only. Arguments of a call may be:

- a `Tensor` (from `ctx.input(i)`, `ctx.output(i)`, `ctx.temp(...)`): passed as a C-contiguous array of the tensor's
  current shape (a 0-d tensor is passed with shape (1,)); `ctx.view(t, shape)` passes it with another shape of the
  same size;
- a numpy array (or `ctx.const(array)`): precomputed data (packed weights, LUTs, multipliers), copied once;
- a Python int/bool (passed as int64) or float (passed as float64).

The executor fuses the calls of consecutive nodes into one compiled function, so `fn` runs with no Python in between.
Kernels never allocate in `fn` and do no bounds checks on shapes: prepare validates. Values that only exist at run
time (e.g. gather indices) are checked inside `fn`, which raises an exception with a constant message.

Output shapes that depend on input *values* (RESHAPE by a computed shape, RANGE, ...) use `ctx.value(i)`: for a
constant input it returns the data; otherwise the node becomes dynamic and its prepare is re-run at invoke time,
when the values exist, as the official runtime does with dynamic tensors.
"""

from __future__ import annotations

import functools
import math
import operator
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .format import strings
from .format.plan import NO_QUANTIZATION, Node, Quantization, TensorSpec
from .jit.symbols import stable_kernel
from .jit.team import TEAM_LIMIT_SYMBOL, TEAM_WORDS, register_team_limit, team_state  # noqa: F401 (kernels/base)


def forwarded(path: str, doc: str | None = None, settable: bool = False) -> property:
    """A property that reads the attribute at the dotted `path` from the instance (`settable`: and writes it there);
    for the accessors that only hand on a member's attribute."""
    get = operator.attrgetter(path)
    if not settable:
        return property(get, doc=doc)
    owner, _, name = path.rpartition(".")
    holder = operator.attrgetter(owner)
    return property(get, lambda self, value: setattr(holder(self), name, value), doc=doc)


class NeedsValue(Exception):
    """Raised by ctx.value() during static prepare when an input's values are only known at run time."""


class Tensor:
    """A tensor as a kernel sees it during prepare: current shape, dtype, quantization, constant data."""

    __slots__ = ("index", "name", "dtype", "shape", "spec", "data", "is_temp")

    def __init__(self, index: int, name: str, dtype: np.dtype, shape: tuple[int, ...],
                 spec: TensorSpec | None = None, data: np.ndarray | None = None, is_temp: bool = False):
        self.index = index
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.spec = spec
        self.data = data
        self.is_temp = is_temp

    @property
    def quantization(self) -> Quantization:
        return self.spec.quantization if self.spec is not None else NO_QUANTIZATION

    scale = forwarded("quantization.scale")
    zero_point = forwarded("quantization.zero_point")

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"Tensor({self.index}, {self.name!r}, {self.dtype}, {list(self.shape)})"


@dataclass(frozen=True)
class TensorView:
    """A tensor passed to a kernel with another shape of the same byte size (and possibly another dtype)."""
    tensor: Tensor
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def index(self) -> int:
        return self.tensor.index


@dataclass(frozen=True)
class ConstArg:
    """Precomputed data for a kernel call (held by the executor, passed as an array)."""
    array: np.ndarray


@dataclass
class Call:
    """One scheduled call of a compiled function."""
    fn: Any
    args: tuple


@dataclass
class OpKernel:
    """A kernel: Python init/prepare/free hooks; prepare schedules njit functions with ctx.call."""
    name: str
    prepare: Callable[["PrepareContext"], None]
    init: Callable[[Any], Any] | None = None
    free: Callable[[Any], None] | None = None
    # Optional Python implementation for ops that must run on the host (control flow, variables):
    # host(rt) is called at invoke time with the runtime (see executor.HostContext).
    host: Callable[..., None] | None = None
    meta: dict = field(default_factory=dict)
    # The op's integer-quantized variant, named in the same registry row: the float prepare hands a node with
    # quantized inputs to it through ctx.prepare_quantized() (the variant lives in another module of the family).
    quantized: "OpKernel | None" = None
    # The op's STRING variant (a host kernel, plain Python / numpy on packed strings: kernels/movement/strings.py,
    # elementwise/string_compare.py), named in the same registry row: the resolver gives it every node of the op
    # that reads or writes a STRING tensor (tensor types are fixed in the file), so the numeric kernel and its
    # compiled path never see strings.
    strings: "OpKernel | None" = None

    def __repr__(self) -> str:
        return f"OpKernel({self.name})"

    def __reduce_ex__(self, protocol):
        """Pickle by reference when the kernel is a module attribute (a `@kernel` prepare, a `@custom_op`
        function): the receiving process imports that module, which also registers its custom ops."""
        where = _module_attribute(self)
        if where is not None:
            return _module_attr, where
        return super().__reduce_ex__(protocol)


def _module_attr(module: str, qualname: str):
    """The object named `qualname` in `module` (imported)."""
    import importlib

    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _module_attribute(k) -> tuple[str, str] | None:
    """(module, qualname) naming `k`, if looking that up gives `k` back."""
    d = k.__dict__ if hasattr(k, "__dict__") else {}
    candidates = [(d.get("__module__"), d.get("__qualname__"))]
    prepare = d.get("prepare")
    if prepare is not None:
        candidates.append((getattr(prepare, "__module__", None), getattr(prepare, "__qualname__", None)))
    for module, qualname in candidates:
        if not module or not qualname or "<" in qualname:
            continue
        try:
            if _module_attr(module, qualname) is k:
                return module, qualname
        except (ImportError, AttributeError):
            continue
    return None


def compiled_address(fn, argtypes: tuple) -> int:
    """Compile (or load from Numba's disk cache) the njit kernel `fn` for the Numba types `argtypes` and return its
    native entry address, for a kernel that calls another by address (parallel drivers). Addresses are per process:
    a prepare asks for them each time."""
    from .jit.compiler import precompile  # lazy: compiler and native_call import Numba when a model is allocated
    from .jit.native_call import native_address  # lazy: as above

    precompile([(fn, argtypes)])
    return native_address(fn.overloads[argtypes])


def call_compiled(fn, *args):
    """fn(*args) for an njit function `fn` called from Python, e.g. a prepare that fills a table with compiled code:
    the same result, but a warm process loads fn's code from the disk cache as it loads the runners' kernels,
    without importing all of Numba's lowering registries (a direct call's first load does)."""
    from .jit.compiler import call_compiled as call  # lazy: compiler imports Numba when a model is allocated

    return call(fn, *args)


def kernel(name: str | None = None, *, init=None, free=None, host=None) -> Callable[[Callable], OpKernel]:
    """Decorator turning a prepare function into an OpKernel (for builtin kernel modules)."""

    def wrap(prepare: Callable) -> OpKernel:
        return OpKernel(name or prepare.__name__, prepare, init=init, free=free, host=host)

    return wrap


class PrepareContext:
    """What a kernel's prepare sees of one node. Created by the executor."""

    def __init__(self, runtime, node: Node, kernel: OpKernel, state: Any):
        self._rt = runtime
        self.node = node
        self.kernel = kernel
        self.state = state
        self.calls: list[Call] = []
        self.temps: list[Tensor] = []
        self.host_data: Any = None
        self.sets_outputs = False  # a host function setting every output at every run (GraphRuntime.run_dynamic)
        self.in_place: list[tuple[int, int]] = []  # (output, input) slots that may share storage (share_storage)
        self.views: list[tuple] = []  # (output, input, its copy's calls): the output is the input's bytes (view_of)

    # --- what the node is -------------------------------------------------------------------------------------
    op_name = forwarded("node.op_name")
    version = forwarded("node.version")
    options = forwarded("node.options")

    @property
    def num_inputs(self) -> int:
        return len(self.node.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    @property
    def num_threads(self) -> int:
        return self._rt.num_threads

    def input(self, i: int) -> Tensor | None:
        """Input i, or None when it is absent (index -1 or past the end)."""
        if i >= len(self.node.inputs) or self.node.inputs[i] < 0:
            return None
        return self._rt.tensor(self.node.inputs[i])

    def intermediate(self, i: int) -> Tensor | None:
        """Intermediate tensor i (internal values' quantization, e.g. the integer LSTM's gate scales) or None."""
        inter = self.node.intermediates
        if i >= len(inter) or inter[i] < 0:
            return None
        return self._rt.tensor(inter[i])

    def output(self, i: int) -> Tensor:
        if i >= len(self.node.outputs) or self.node.outputs[i] < 0:
            self.fail(f"output {i} is missing")
        return self._rt.tensor(self.node.outputs[i])

    @property
    def inputs(self) -> list[Tensor | None]:
        return [self.input(i) for i in range(self.num_inputs)]

    @property
    def outputs(self) -> list[Tensor]:
        return [self.output(i) for i in range(self.num_outputs)]

    # --- validation -------------------------------------------------------------------------------------------
    def fail(self, msg: str):
        """Raise the error a kernel reports: names the op, its version and the node."""
        raise ValueError(f"{self.op_name} (version {self.version}, node {self.node.index}): {msg}")

    def check(self, cond: bool, msg: str) -> None:
        if not cond:
            self.fail(msg)

    def prepare_quantized(self) -> None:
        """Prepare with the op's quantized variant (its registry row's `quantized=`), for quantized inputs."""
        variant = getattr(self.kernel, "quantized", None)
        if variant is None:
            x = self.input(0)
            self.fail(f"quantized {x.dtype.name if x is not None else ''} inputs are not supported by this op")
        variant.prepare(self)

    def check_dtype(self, t: Tensor, *dtypes) -> None:
        if t.dtype not in [np.dtype(d) for d in dtypes]:
            names = ", ".join(np.dtype(d).name for d in dtypes)
            self.fail(f"tensor {t.name!r} has type {t.dtype.name}, expected one of: {names}")

    def check_num(self, inputs: int | tuple[int, int] | None = None, outputs: int | None = None) -> None:
        if inputs is not None:
            lo, hi = (inputs, inputs) if isinstance(inputs, int) else inputs
            self.check(lo <= self.num_inputs <= hi, f"expected {inputs} inputs, got {self.num_inputs}")
        if outputs is not None:
            self.check(self.num_outputs == outputs, f"expected {outputs} outputs, got {self.num_outputs}")

    # --- shapes and values ------------------------------------------------------------------------------------
    def set_output(self, i: int, shape, dtype=None) -> Tensor:
        """Set output i's shape (and check its declared dtype when dtype is given)."""
        t = self.output(i)
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            self.fail(f"output {i} would have negative dimension in shape {list(shape)}")
        if dtype is not None and np.dtype(dtype) != t.dtype:
            self.fail(f"output {t.name!r} has type {t.dtype.name}, expected {np.dtype(dtype).name}")
        self._rt.set_shape(t.index, shape)
        return t

    def value(self, i: int) -> np.ndarray:
        """The values of input i: constant data, or (when run dynamically) the computed values.

        During static prepare a non-constant input raises NeedsValue, which makes this node dynamic."""
        t = self.input(i)
        if t is None:
            self.fail(f"input {i} is missing")
        if t.data is not None:
            return t.data
        if t.size == 0:  # nothing to wait for (litert-torch's RESHAPE to a scalar has an empty shape input)
            return np.zeros(t.shape, t.dtype)
        return self._rt.runtime_value(t.index)

    # --- host ops (control flow, resource variables): run from Python at invoke time ----------------------------
    def input_array(self, i: int) -> np.ndarray:
        """The current values of input i (host ops only)."""
        if i >= len(self.node.inputs) or self.node.inputs[i] < 0:
            self.fail(f"input {i} is absent (the operator's inputs are {list(self.node.inputs)}; -1 marks an absent "
                      f"one)")
        return self._rt.array(self.node.inputs[i])

    def set_output_array(self, i: int, value: np.ndarray) -> None:
        """Give output i these values (and their shape) (host ops only)."""
        t = self.output(i)
        value = np.asarray(value)
        if value.dtype != t.dtype:
            self.fail(f"output {t.name!r} has type {t.dtype.name}, got {value.dtype.name}")
        dst = self._rt.array(t.index)
        if dst.shape != value.shape or t.shape != value.shape:  # (the same shape as last time: nothing to plan)
            self.set_output(i, value.shape)
            dst = self._rt.array(t.index)
        np.copyto(dst, value)

    def bind_output_arrays(self, values: list[np.ndarray]) -> None:
        """Output i becomes values[i] itself when its shape is dynamic (the caller leaves the array unchanged while it
        is the output's), else gets a copy, as set_output_array (host ops only; arrays of the outputs' dtypes)."""
        rt = self._rt
        dynamic, arrays, tensors = rt.dynamic_tensors, rt.dynamic_arrays, rt.tensors
        for i, o in enumerate(self.node.outputs):
            value, t = values[i], tensors[o]
            if o in dynamic and value.dtype == t.dtype and t.dtype.kind != "O":
                t.shape = value.shape
                arrays[o] = value
            else:
                self.set_output_array(i, value)

    def output_array(self, i: int) -> np.ndarray:
        """The storage of output i when prepare fixed its shape (host ops only); None if it is dynamic."""
        o = self.node.outputs[i]
        return None if o in self._rt.dynamic_tensors else self._rt.array(o)

    # --- STRING tensors (host kernels): packed values outside the arena, lite_numba/format/strings.py -----------
    def input_strings(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(packed buffer, offsets) of STRING input i: string k is buffer[offsets[k]:offsets[k + 1]] (int64 offsets,
        checked against the buffer and the tensor's element count: a corrupt value raises, naming the tensor)."""
        t = self.input(i)
        if t is None or t.dtype != object:
            self.fail(f"input {i} is {'absent' if t is None else t.dtype.name}, expected a STRING tensor")
        buf = self._rt.array(t.index)
        try:
            return buf, strings.offsets(buf, t.size, f"input {i} ({t.name!r})")
        except strings.StringBufferError as e:
            self.fail(str(e))

    def input_items(self, i: int) -> list[bytes]:
        """STRING input i's strings as bytes objects, in C order."""
        return strings.items(*self.input_strings(i))

    def string_output(self, i: int, shape, nbytes: int) -> np.ndarray:
        """Set STRING output i's shape and return its storage for the next value: a writable uint8 buffer of exactly
        `nbytes` (the packed size, strings.packed_size / take_size), which the kernel fills with a whole packed value
        (strings.build / take). The runtime's memory limit applies."""
        t = self.set_output(i, shape)
        if t.dtype != object:
            self.fail(f"output {i} ({t.name!r}) is {t.dtype.name}, expected a STRING tensor")
        return self._rt.strings.reserve(t.index, int(nbytes), t.name)

    def set_output_items(self, i: int, shape, items) -> None:
        """STRING output i takes this shape and these strings (bytes objects, C order)."""
        packed = strings.pack(items)
        self.string_output(i, shape, packed.size)[:] = packed

    def defer(self) -> None:
        """Declare that this node's output shapes are known only at run time (its outputs become dynamic)."""
        if not self._rt.defer():  # shapes depend on data, not only on values read with ctx.value()
            raise NeedsValue(-1)

    @property
    def max_while_iterations(self) -> int | None:
        """The caller's limit on WHILE iterations (Interpreter.max_while_iterations), or None."""
        return getattr(self._rt.host_env, "max_while_iterations", None)

    def call_subgraph(self, index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Run subgraph `index` on these inputs; returns copies of its outputs (host ops only)."""
        return self._rt.host_env.call_subgraph(index, inputs)

    def bind_subgraph(self, index: int, inputs: list[np.ndarray]):
        """Subgraph `index` prepared for `inputs`' shapes, run many times without copies (host ops; BoundSubgraph)."""
        return self._rt.host_env.bind_subgraph(index, inputs)

    def lower_control_flow(self, host_reason: str | None = None) -> bool:
        """Run this control-flow node (WHILE, IF, STABLEHLO_CASE, CALL_ONCE) inside its graph's compiled runner: the
        runtime prepares the called subgraphs once and schedules the node's one compiled call (True; the node is then
        static), or records why it keeps the host path and returns False (lite_numba.runtime.control). With
        `host_reason` it only records that reason (the prepare already knows the node must run on the host)."""
        lower = getattr(self._rt.host_env, "lower_control_flow", None)
        return bool(lower is not None and lower(self, self._rt, host_reason))

    def while_trace(self, cond: int, body: int, first: list, steps: list):
        """A WHILE whose loop variables change shape replayed by one compiled call (host ops; control.lowering
        WhileTrace), or None when a step is not compiled code only."""
        control = getattr(self._rt.host_env, "control", None)
        return None if control is None else control.trace(cond, body, first, steps)

    def restart_subgraph_variables(self, index: int) -> None:
        """Reset the variable tensors of subgraph `index` before a WHILE or IF runs it, as the official runtime's
        allocation of its subgraphs at every run does (host ops only; see ModelRuntime.restart_variables)."""
        self._rt.host_env.restart_variables(index)

    def subgraph_output_shapes(self, index: int, inputs: list[tuple]) -> list[tuple] | None:
        """The output shapes of subgraph `index` prepared for inputs of these shapes, or None when one of them is
        known only at run time (host ops' prepare; prepares the subgraph, as TFLite's WHILE and IF do)."""
        return self._rt.host_env.subgraph_output_shapes(index, inputs)

    def for_node(self, node: Node, kernel: OpKernel) -> PrepareContext:
        """A context preparing `node` with `kernel` on this node's runtime (a fused kernel prepares its stages so)."""
        return PrepareContext(self._rt, node, kernel, None)

    def subgraph_signature(self, index: int) -> tuple[list, list]:
        """([(dtype, shape)] of inputs, [(dtype, shape)] of outputs) as subgraph `index` declares them."""
        return self._rt.host_env.subgraph_io(index)

    @property
    def resources(self) -> dict:
        """Interpreter-wide state host ops share (resource variables, CALL_ONCE flags); reset_all_variables() clears."""
        return self._rt.host_env.resources

    def set_known_value(self, i: int, value) -> None:
        """Declare output i's values as known at prepare time (SHAPE, RANK): later nodes that read it with
        ctx.value() stay static instead of becoming dynamic. The kernel must still write the values at invoke."""
        t = self.output(i)
        self._rt.known_values[t.index] = np.asarray(value, t.dtype).reshape(t.shape)

    # --- scheduling -------------------------------------------------------------------------------------------
    def temp(self, shape, dtype) -> Tensor:
        """A scratch tensor that lives during this node only (placed in the arena)."""
        t = self._rt.new_temp(tuple(int(d) for d in shape), np.dtype(dtype))
        self.temps.append(t)
        return t

    def view(self, t: Tensor, shape, dtype=None) -> TensorView:
        """Pass `t` with another shape (same element count), or reinterpret its bytes as `dtype`."""
        shape = tuple(int(d) for d in shape)
        dt = t.dtype if dtype is None else np.dtype(dtype)
        if math.prod(shape) * dt.itemsize != t.nbytes:
            self.fail(f"cannot view {t.name!r} of shape {list(t.shape)} ({t.dtype.name}) as {list(shape)} ({dt.name})")
        return TensorView(t, shape, dt)

    def const(self, array) -> ConstArg:
        return ConstArg(np.ascontiguousarray(array))

    def share_storage(self, output: int = 0, input: int = 0) -> None:
        """Declare that output slot `output` may live in the storage of input slot `input` (same byte size): the
        scheduled calls must give the right result when both are the same memory — DYNAMIC_UPDATE_SLICE skips its
        copy of the operand when `out.ctypes.data == x.ctypes.data` and writes only the update. The memory plan
        grants it when no later node (and no caller, for a graph output) reads the input, the input is no constant,
        variable or graph input (unless its owner made that input writable), and no other input of this node shares
        its storage (runtime/arena.py, plan_aliases); otherwise the two stay apart and the calls copy as usual."""
        self.in_place.append((int(output), int(input)))

    def view_of(self, output: int = 0, input: int = 0) -> None:
        """Declare that output slot `output` holds exactly the bytes of input slot `input` (RESHAPE, SQUEEZE,
        EXPAND_DIMS, BITCAST), the calls scheduled so far being the copy that makes it so: the memory plan may place
        the output in the input's storage, and then those calls do not run. Granted when neither tensor's storage
        class holds a graph input or output, a constant, a variable or a tensor a host or dynamic node touches
        (runtime/arena.py, plan_aliases), whether or not later nodes read the input (both are read only from then
        on); otherwise the copy runs as usual."""
        self.views.append((int(output), int(input), tuple(self.calls)))

    def call(self, fn, *args) -> None:
        """Schedule fn(*args) for this node; several calls run in order.

        fn is replaced by its stably named equivalent (lite_numba.jit.symbols.stable_kernel): closures and other
        functions without a unique module-level name get a name derived from what they captured, so that Numba's
        disk cache never links one kernel's code in place of another's."""
        checked = []
        for a in args:
            if isinstance(a, (Tensor, TensorView, ConstArg)):
                checked.append(a)
            elif isinstance(a, np.ndarray):
                checked.append(ConstArg(np.ascontiguousarray(a)))
            elif isinstance(a, (bool, np.bool_)):
                checked.append(int(a))
            elif isinstance(a, (int, np.integer)):
                checked.append(int(a))
            elif isinstance(a, (float, np.floating)):
                checked.append(float(a))
            else:
                raise TypeError(f"{self.op_name}: unsupported kernel argument {type(a).__name__}")
            if isinstance(a, (Tensor, TensorView)) and (a.tensor if isinstance(a, TensorView) else a).dtype == object:
                t = a.tensor if isinstance(a, TensorView) else a  # STRING: packed values, for host kernels only
                self.fail(f"STRING tensor {t.name!r} is not supported by this op's kernels")
            half = a.array.dtype if isinstance(a, ConstArg) else \
                a.dtype if isinstance(a, (Tensor, TensorView, np.ndarray)) else None
            if half == np.float16:  # Numba has no CPU float16 arrays: name the tensor instead of its bare error
                t = a.tensor if isinstance(a, TensorView) else a
                self.fail(f"float16 data ({getattr(t, 'name', 'a constant')!r}) is not supported by this op's "
                          f"kernels")
        self.calls.append(Call(stable_kernel(fn), tuple(checked)))


# --- custom ops -----------------------------------------------------------------------------------------------

def _jit(fn):
    """fn compiled with Numba, cached on disk when Numba can locate its source (a module file, a notebook cell),
    and compiled per process otherwise: functions typed at the REPL, given to `python -c` or on stdin, or made by
    exec() have no file for Numba's cache index, and njit(cache=True) refuses them at decoration."""
    from numba import njit  # lazy: Numba is imported when a custom op is first used, not with lite_numba
    from numba.core.registry import CPUDispatcher  # lazy: as above
    if isinstance(fn, CPUDispatcher):
        return fn
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError as e:
        if "cannot cache function" not in str(e):
            raise
        return njit(cache=False, nogil=True)(fn)


class CustomOp(OpKernel):
    """A custom op made from a plain Python function by @custom_op; calling it calls the compiled function."""

    def __init__(self, name: str, fn, prepare=None, init=None, free=None):
        self._fn, self._jitted, self.user_prepare = fn, None, prepare  # (compiled on first use: `jitted`)
        super().__init__(name, self._prepare, init=init, free=free)
        functools.update_wrapper(self, fn, updated=())

    @property
    def jitted(self):  # (so defining an op, as the shipped plugins do, does not import Numba)
        if self._jitted is None:
            self._jitted = _jit(self._fn)
        return self._jitted

    def __call__(self, *args):
        return self.jitted(*args)

    def _prepare(self, ctx: PrepareContext) -> None:
        extra = ()
        if self.user_prepare is not None:
            extra = self.user_prepare(ctx) or ()
            if not isinstance(extra, (tuple, list)):
                extra = (extra,)
        else:
            first = ctx.input(0)
            for i in range(ctx.num_outputs):
                ctx.set_output(i, first.shape if first is not None else ctx.output(i).shape)
        args = [t for t in ctx.inputs if t is not None] + ctx.outputs + list(extra)
        ctx.call(self.jitted, *args)


class CustomOpRegistry:
    """A set of custom ops: kernels by name and version range, and kernels for every custom op whose name starts with
    a prefix (a family of ops decoded by one kernel, such as the `Flex<TfOp>` ops). `DEFAULT_REGISTRY` holds the
    default op set's custom ops; `default_op_resolver()` adds them to the builtins.

    Ops arrive two ways. A pack of ops (the shipped lite_numba.plugins, a third-party pack of the entry-point group
    "lite_numba.ops") registers through its function `register(ops)`, called by `add_pack` with this registry;
    importing a pack registers nothing. Everything else is added directly: `@custom_op` adds to DEFAULT_REGISTRY.
    A resolver gets the packs' ops first, then the ones added directly, each in registration order; the later
    registration of a name and version wins, so an op a user defines overrides a pack's op of the same name whatever
    the import order.

    `add_custom` and `add_custom_prefix` are MutableOpResolver's, so a pack's `register` fills either: this registry,
    or an op set of one's own (`lite_numba.plugins.mediapipe.register(BuiltinOpResolver())`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._customs: list[tuple[bool, str, int, int, OpKernel]] = []  # (from a pack, name, lo, hi, kernel)
        self._prefixes: list[tuple[bool, str, OpKernel]] = []  # (from a pack, prefix, kernel)
        self._in_pack = threading.local()  # .depth: add_pack calls running on this thread

    def _from_pack(self) -> bool:
        return getattr(self._in_pack, "depth", 0) > 0

    def add_custom(self, name: str, kernel: OpKernel | Callable, min_version: int = 1, max_version: int = 1) -> None:
        """Register a custom op; `kernel` is an OpKernel, a @custom_op function or a plain Python function."""
        if not isinstance(kernel, OpKernel):
            kernel = CustomOp(name, kernel)
        with self._lock:
            self._customs.append((self._from_pack(), name, int(min_version), int(max_version), kernel))

    def add_custom_prefix(self, prefix: str, kernel: OpKernel) -> None:
        """Register `kernel` for every custom op named `prefix...` (any version) that has no registration of its own
        (the longest matching prefix wins); the kernel reads the op's name from its node."""
        if not isinstance(kernel, OpKernel):
            raise TypeError(f"add_custom_prefix expects an OpKernel, got {type(kernel).__name__}")
        with self._lock:
            self._prefixes.append((self._from_pack(), prefix, kernel))

    def add_pack(self, pack) -> None:
        """Register a pack of ops. `pack` is its function `register(ops)`, a module defining one, or an entry point
        (importlib.metadata.EntryPoint) naming either, loaded here; `register` is called with this registry. A
        module without `register` is a legacy pack: its `@custom_op` decorators registered its ops into the default
        op set when it was imported (loading it here counts them as the pack's). An OpKernel joins under its name
        and the versions its @custom_op declared."""
        self._in_pack.depth = getattr(self._in_pack, "depth", 0) + 1
        try:
            if not isinstance(pack, (types.ModuleType, OpKernel)) and callable(getattr(pack, "load", None)):
                pack = pack.load()  # an entry point: import it while counting as a pack (legacy @custom_op modules)
            if isinstance(pack, OpKernel):
                self.add_custom(pack.name, pack, *pack.meta.get("versions", (1, 1)))
            elif isinstance(pack, types.ModuleType):
                register = getattr(pack, "register", None)
                if register is not None:
                    register(self)
            elif callable(pack):
                pack(self)
            else:
                raise TypeError(f"a pack of ops is a function register(ops), a module or an entry point, got "
                                f"{type(pack).__name__}")
        finally:
            self._in_pack.depth -= 1

    def custom_ops(self) -> list[tuple[str, int, int, OpKernel]]:
        """(name, min version, max version, kernel) in the order a resolver adds them: packs' ops, then the rest."""
        with self._lock:
            rows = list(self._customs)
        return [(n, lo, hi, k) for _, n, lo, hi, k in sorted(rows, key=lambda r: not r[0])]

    def custom_prefixes(self) -> list[tuple[str, OpKernel]]:
        """(prefix, kernel) in the order a resolver adds them: packs' prefixes, then the rest."""
        with self._lock:
            rows = list(self._prefixes)
        return [(p, k) for _, p, k in sorted(rows, key=lambda r: not r[0])]

    def add_to(self, resolver) -> None:
        """Add every op of this set to `resolver` (a MutableOpResolver), in the order of `custom_ops`."""
        for name, lo, hi, k in self.custom_ops():
            resolver.add_custom(name, k, lo, hi)
        for prefix, k in self.custom_prefixes():
            resolver.add_custom_prefix(prefix, k)


DEFAULT_REGISTRY = CustomOpRegistry()


def custom_op(name: str, version: int = 1, versions: tuple[int, int] | None = None, *, prepare=None, init=None,
              free=None, register: bool = True) -> Callable[[Callable], CustomOp]:
    """Make a plain Python function a custom op, compiled with Numba.

    The function receives the node's present inputs, then its outputs, then whatever `prepare` returns::

        @custom_op("Atan")
        def atan(x, out):
            for i in range(x.size):
                out.flat[i] = np.arctan(x.flat[i])

    Without `prepare`, every output takes input 0's shape. `prepare(ctx)` may set output shapes, validate, request
    temporaries and return extra arguments. `init(options)` receives the decoded custom options (a flexbuffer map
    becomes a dict) and returns a state available as `ctx.state`. The op joins the default op set
    (`DEFAULT_REGISTRY`) for versions `version` (or the inclusive range `versions`); with `register=False` it joins
    none, for a resolver of one's own (`add_custom`) or a pack's `register(ops)`.
    """
    lo, hi = versions if versions is not None else (version, version)

    def wrap(fn) -> CustomOp:
        op = CustomOp(name, fn, prepare=prepare, init=init, free=free)
        op.meta["versions"] = (lo, hi)
        if register:
            DEFAULT_REGISTRY.add_custom(name, op, lo, hi)
        return op

    return wrap


def default_custom_ops() -> list[tuple[str, int, int, OpKernel]]:
    """The default op set's custom ops (DEFAULT_REGISTRY.custom_ops())."""
    return DEFAULT_REGISTRY.custom_ops()


def register_custom_prefix(prefix: str, op: OpKernel) -> OpKernel:
    """Add `op` to the default op set for every custom op whose name starts with `prefix` and has no kernel of its
    own (a family of ops decoded by one kernel, such as the `Flex<TfOp>` ops of SELECT_TF_OPS models)."""
    DEFAULT_REGISTRY.add_custom_prefix(prefix, op)
    return op


def default_custom_prefixes() -> list[tuple[str, OpKernel]]:
    """The default op set's custom-op prefixes (DEFAULT_REGISTRY.custom_prefixes())."""
    return DEFAULT_REGISTRY.custom_prefixes()
