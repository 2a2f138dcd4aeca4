"""`ModelBuilder`: write valid .tflite files in code. This is the public name of lite_numba.format.builder."""

from .format.builder import (
    FILE_IDENTIFIER,
    SCHEMA_VERSION,
    ModelBuilder,
    SubgraphBuilder,
    builtin_code,
    builtin_options_table,
    numpy_to_tensor_type,
    options_fields,
    tensor_type_to_numpy,
)

__all__ = ["FILE_IDENTIFIER", "SCHEMA_VERSION", "ModelBuilder", "SubgraphBuilder", "builtin_code",
           "builtin_options_table", "numpy_to_tensor_type", "options_fields", "tensor_type_to_numpy"]
