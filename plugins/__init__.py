"""Custom-op packs shipped with lite-numba (installed as `lite_numba.plugins`): examples (Atan, HardSwish), mediapipe
(MediaPipe's custom ops), flex (the Flex ops of SELECT_TF_OPS models).

Importing a pack registers nothing. Each pack module has `register(ops)`, which adds its ops to `ops` (a
lite_numba.ops.CustomOpRegistry or a MutableOpResolver); `register` here adds all three. The default op set gets
them from `lite_numba.runtime.resolver.load_packs`, with the third-party packs of the entry-point group
"lite_numba.ops", which follow the same contract.
"""

from . import examples, flex, mediapipe


def register(ops) -> None:
    """Add every shipped pack's ops to `ops` (a CustomOpRegistry or a MutableOpResolver)."""
    examples.register(ops)
    mediapipe.register(ops)
    flex.register(ops)
