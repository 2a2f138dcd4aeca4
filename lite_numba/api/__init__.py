"""The public Python API, shaped like the official runtime's: `Interpreter` and `SignatureRunner`
(ai_edge_litert.interpreter), copies and pickling of an interpreter, delegates (always refused), and
`install_as_tflite_runtime()`. Public names are re-exported by lite_numba and lite_numba.interpreter.

Built on runtime.ModelRuntime's public methods only; may import format, runtime and the kernel contract.
"""
