"""The .tflite file format, read and written: the schema's tables (`schema`), the loader that validates a model file
into an immutable plan (`model` -> `plan`), builtin and custom options decoding, and the `ModelBuilder` that writes
valid files (tests, examples, users).

Imports nothing else of lite_numba: every other layer builds on it.
"""
