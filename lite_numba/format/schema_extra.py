"""Schema tables newer than the `tflite` package (2.18) the rest of format/ reads, written here by hand in the shape
of flatc's Python output (so builtin_options.py reads them and builder_options.py writes them like the generated
ones): the StablehloCaseOptions table (`branch_subgraph_indices: [int]`, BuiltinOptions2 member 23) of the
STABLEHLO_CASE op (builtin code 209). From the schema of ai-edge-litert 2.3 (tflite/converter/schema/schema.fbs).
"""

from __future__ import annotations

import flatbuffers
from flatbuffers import number_types

# op and options-union entries the tflite package lacks: code -> name
BUILTIN_OPERATORS = {209: "STABLEHLO_CASE"}
OPTIONS2_MEMBERS = {23: "StablehloCaseOptions"}


class StablehloCaseOptions:
    """Reader of the StablehloCaseOptions table."""

    __slots__ = ["table"]

    def Init(self, buf, pos):  # noqa: N802 - flatc's accessor names, read by reflection
        self.table = flatbuffers.table.Table(buf, pos)

    def BranchSubgraphIndices(self, j):  # noqa: N802
        o = number_types.UOffsetTFlags.py_type(self.table.Offset(4))
        if o != 0:
            a = self.table.Vector(o)
            return self.table.Get(number_types.Int32Flags, a + number_types.UOffsetTFlags.py_type(j * 4))
        return 0

    def BranchSubgraphIndicesAsNumpy(self):  # noqa: N802
        o = number_types.UOffsetTFlags.py_type(self.table.Offset(4))
        if o != 0:
            return self.table.GetVectorAsNumpy(number_types.Int32Flags, o)
        return 0

    def BranchSubgraphIndicesLength(self):  # noqa: N802
        o = number_types.UOffsetTFlags.py_type(self.table.Offset(4))
        if o != 0:
            return self.table.VectorLen(o)
        return 0

    def BranchSubgraphIndicesIsNone(self):  # noqa: N802
        return number_types.UOffsetTFlags.py_type(self.table.Offset(4)) == 0


def StablehloCaseOptionsStart(builder):  # noqa: N802
    builder.StartObject(1)


def StablehloCaseOptionsAddBranchSubgraphIndices(builder, branchSubgraphIndices):  # noqa: N802, N803
    builder.PrependUOffsetTRelativeSlot(0, flatbuffers.number_types.UOffsetTFlags.py_type(branchSubgraphIndices), 0)


def StablehloCaseOptionsStartBranchSubgraphIndicesVector(builder, numElems):  # noqa: N802, N803
    return builder.StartVector(4, numElems, 4)


def StablehloCaseOptionsEnd(builder):  # noqa: N802
    return builder.EndObject()


TABLES = {"StablehloCaseOptions": StablehloCaseOptions}
