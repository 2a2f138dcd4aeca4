"""The hash-table resources (what tf.lookup.StaticHashTable converts to): HASHTABLE, HASHTABLE_IMPORT,
HASHTABLE_FIND, HASHTABLE_SIZE, as the official kernels run them (tflite/kernels/hashtable*.cc,
experimental/resource/static_hashtable.cc).

A table is a resource of the model (`ctx.resources["hashtables"]`, shared by every subgraph, kept across invokes and
by reset_all_variables(), carried by copies and pickles): HASHTABLE gives its id (the `table_id` option) as a RESOURCE
tensor and creates the table the first time it runs, with its key and value types — string -> int64 or int64 ->
string, the only pairs the official kernels make; HASHTABLE_IMPORT fills it once (the first import wins, later ones do
nothing; a duplicated key keeps its first value, as std::unordered_map::insert); HASHTABLE_FIND looks keys up, a
missing key giving the first element of the default value; HASHTABLE_SIZE counts the keys. Host kernels in Python:
a dict per table, strings as bytes (never decoded). Keys of another type than the table's are an error naming the
node and the tensor (the official kernel's CheckKeyAndValueTypes).
"""

from __future__ import annotations

import numpy as np

from lite_numba.ops import PrepareContext, kernel

# the schema's TensorType codes of the two key / value types
INT64, STRING = 4, 5
TYPE_NAMES = {INT64: "INT64", STRING: "STRING"}
PAIRS = {(STRING, INT64), (INT64, STRING)}


class Table:
    """One static hash table: key / value types (TensorType codes), its entries, whether it was imported."""

    def __init__(self, key_type: int, value_type: int):
        self.key_type = key_type
        self.value_type = value_type
        self.entries: dict = {}
        self.ready = False

    def __deepcopy__(self, memo) -> Table:  # (capture_state deep-copies resources: entries are immutable keys/values)
        new = Table(self.key_type, self.value_type)
        new.entries = dict(self.entries)
        new.ready = self.ready
        return new


def _type_code(t) -> int:
    return STRING if t.dtype == object else INT64 if t.dtype == np.int64 else -1


def _type_name(t) -> str:
    return "STRING" if t.dtype == object else t.dtype.name.upper()


def _check_handle(ctx: PrepareContext, i: int = 0) -> None:
    h = ctx.input(i)
    ctx.check(h is not None and h.spec is not None and h.spec.type_name == "RESOURCE",
              f"input {i} must be the table's RESOURCE tensor")
    ctx.check(h.shape == (1,), f"the table handle must have shape [1], got {list(h.shape)}")


def _table(ctx: PrepareContext, i: int = 0) -> Table:
    """The table whose id input i holds; it must exist (a HASHTABLE node ran)."""
    rid = int(np.asarray(ctx.input_array(i)).reshape(-1)[0])
    table = ctx.resources.get("hashtables", {}).get(rid)
    if table is None:
        ctx.fail(f"no hash table with id {rid} (input {i} {ctx.input(i).name!r}): a HASHTABLE node creates it")
    return table


def _check_keys(ctx: PrepareContext, table: Table, i: int, what: str) -> None:
    t = ctx.input(i)
    if _type_code(t) != table.key_type:
        ctx.fail(f"{what} {t.name!r} are {_type_name(t)}, the table's keys are {TYPE_NAMES[table.key_type]}")


# --- HASHTABLE ------------------------------------------------------------------------------------------------------

def _hashtable(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=0, outputs=1)
    key, value = int(ctx.options.get("key_dtype", 0)), int(ctx.options.get("value_dtype", 0))
    ctx.check((key, value) in PAIRS, f"key type {key} and value type {value}: the official kernels make string -> "
                                     f"int64 and int64 -> string tables only")
    out = ctx.output(0)
    ctx.check(out.spec is not None and out.spec.type_name == "RESOURCE", "the output must be a RESOURCE tensor")
    ctx.set_output(0, (1,))


def _hashtable_host(ctx: PrepareContext) -> None:
    rid = int(ctx.options.get("table_id", 0))
    key, value = int(ctx.options["key_dtype"]), int(ctx.options["value_dtype"])
    tables = ctx.resources.setdefault("hashtables", {})
    table = tables.get(rid)
    if table is None:
        tables[rid] = Table(key, value)
    elif (table.key_type, table.value_type) != (key, value):
        ctx.fail(f"hash table {rid} exists with {TYPE_NAMES[table.key_type]} -> {TYPE_NAMES[table.value_type]}, "
                 f"this node declares {TYPE_NAMES[key]} -> {TYPE_NAMES[value]}")
    ctx.set_output_array(0, np.array([rid], np.int32))


# --- HASHTABLE_IMPORT -------------------------------------------------------------------------------------------------

def _import(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=3, outputs=0)
    _check_handle(ctx)
    keys, values = ctx.input(1), ctx.input(2)
    ctx.check((_type_code(keys), _type_code(values)) in PAIRS,
              f"keys {_type_name(keys)} and values {_type_name(values)}: the official kernels import string -> "
              f"int64 or int64 -> string")
    ctx.check(keys.shape == values.shape, f"keys {list(keys.shape)} and values {list(values.shape)} differ in shape")


def _items(ctx: PrepareContext, i: int) -> list:
    return ctx.input_items(i) if ctx.input(i).dtype == object else ctx.input_array(i).reshape(-1).tolist()


def _import_host(ctx: PrepareContext) -> None:
    table = _table(ctx)
    _check_keys(ctx, table, 1, "keys")
    if _type_code(ctx.input(2)) != table.value_type:
        ctx.fail(f"values {ctx.input(2).name!r} are {_type_name(ctx.input(2))}, the table's values are "
                 f"{TYPE_NAMES[table.value_type]}")
    if table.ready:  # imported once; later imports do nothing
        return
    for k, v in zip(_items(ctx, 1), _items(ctx, 2)):
        table.entries.setdefault(k, v)
    table.ready = True


# --- HASHTABLE_FIND ---------------------------------------------------------------------------------------------------

def _find(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=3, outputs=1)
    _check_handle(ctx)
    keys, default, out = ctx.input(1), ctx.input(2), ctx.output(0)
    ctx.check(default.dtype == out.dtype, f"default value {_type_name(default)} and output {_type_name(out)} "
                                          f"differ in type")
    ctx.check((_type_code(keys), _type_code(out)) in PAIRS,
              f"keys {_type_name(keys)} and values {_type_name(out)}: the official kernels look up string -> int64 "
              f"or int64 -> string")
    ctx.check(default.size >= 1, "the default value is empty")
    ctx.set_output(0, keys.shape)


def _find_host(ctx: PrepareContext) -> None:
    table = _table(ctx)
    _check_keys(ctx, table, 1, "keys")
    out = ctx.output(0)
    if _type_code(out) != table.value_type:
        ctx.fail(f"output {out.name!r} is {_type_name(out)}, the table's values are {TYPE_NAMES[table.value_type]}")
    if not table.ready:
        ctx.fail("hashtable need to be initialized before using (no HASHTABLE_IMPORT has run)")
    default = _items(ctx, 2)[0]
    get = table.entries.get
    found = [get(k, default) for k in _items(ctx, 1)]
    shape = ctx.input(1).shape
    if out.dtype == object:
        ctx.set_output_items(0, shape, found)
    else:
        ctx.set_output_array(0, np.array(found, np.int64).reshape(shape))


# --- HASHTABLE_SIZE ---------------------------------------------------------------------------------------------------

def _size(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=1, outputs=1)
    _check_handle(ctx)
    ctx.check(ctx.output(0).dtype == np.int64, f"the output must be int64, got {ctx.output(0).dtype.name}")
    ctx.set_output(0, (1,))


def _size_host(ctx: PrepareContext) -> None:
    ctx.set_output_array(0, np.array([len(_table(ctx).entries)], np.int64))


HASHTABLE = kernel("HASHTABLE", host=_hashtable_host)(_hashtable)
HASHTABLE_IMPORT = kernel("HASHTABLE_IMPORT", host=_import_host)(_import)
HASHTABLE_FIND = kernel("HASHTABLE_FIND", host=_find_host)(_find)
HASHTABLE_SIZE = kernel("HASHTABLE_SIZE", host=_size_host)(_size)

__all__ = ["HASHTABLE", "HASHTABLE_IMPORT", "HASHTABLE_FIND", "HASHTABLE_SIZE", "Table"]
