"""The one table of builtin kernels: (op, min version, max version, kernel), like TFLite's register.cc.

A reader answers "which versions of CONV_2D do we run?" here. Each family keeps its rows in its own block.
"""

from __future__ import annotations

from . import elementwise as ew
from . import fully_connected as fc
from . import reshape, softmax

BUILTINS = [
    # --- elementwise arithmetic (float32/int32; int8 from v2, int16 from v3) ---
    ("ADD", 1, 5, ew.ADD),
    ("SUB", 1, 5, ew.SUB),
    ("MUL", 1, 7, ew.MUL),
    ("DIV", 1, 2, ew.DIV),
    # --- activations ---
    ("RELU", 1, 3, ew.RELU),
    ("RELU6", 1, 3, ew.RELU6),
    ("RELU_N1_TO_1", 1, 2, ew.RELU_N1_TO_1),
    ("LOGISTIC", 1, 3, ew.LOGISTIC),
    ("TANH", 1, 3, ew.TANH),
    ("HARD_SWISH", 1, 1, ew.HARD_SWISH),
    ("SOFTMAX", 1, 3, softmax.SOFTMAX),
    ("LOG_SOFTMAX", 1, 2, softmax.LOG_SOFTMAX),
    # --- fully connected ---
    ("FULLY_CONNECTED", 1, 12, fc.FULLY_CONNECTED),
    # --- shape ---
    ("RESHAPE", 1, 1, reshape.RESHAPE),
    ("SQUEEZE", 1, 2, reshape.SQUEEZE),
    ("EXPAND_DIMS", 1, 1, reshape.EXPAND_DIMS),
]
