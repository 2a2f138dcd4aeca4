"""A `tf.lite`-shaped namespace: replace `tf.lite.` with `lite.` after `from lite_numba import lite`.

    lite.Interpreter(model_path=...)              # tf.lite.Interpreter
    lite.experimental.load_delegate("x.so")       # tf.lite.experimental.load_delegate (always raises: no delegates)
    lite.experimental.OpResolverType.BUILTIN      # tf.lite.experimental.OpResolverType

Only the inference side of tf.lite exists here: there is no converter (`tf.lite.TFLiteConverter`).
"""

from __future__ import annotations

from types import SimpleNamespace

from .interpreter import Interpreter, InterpreterWithCustomOps, OpResolverType, SignatureRunner, load_delegate

experimental = SimpleNamespace(load_delegate=load_delegate, OpResolverType=OpResolverType)

__all__ = ["Interpreter", "InterpreterWithCustomOps", "OpResolverType", "SignatureRunner", "experimental"]
