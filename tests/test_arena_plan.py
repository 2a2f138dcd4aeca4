"""The arena planner (lite_numba.runtime.arena.plan_arena): buffers alive at the same time never overlap, and start at
least 256 bytes apart (so that a vectorised loop's run-time alias check never sends a node with tiny tensors to
its scalar copy); buffers whose lifetimes do not meet share space."""

from __future__ import annotations

import itertools

import numpy as np

from lite_numba.runtime.arena import ALIGNMENT, Allocation, plan_arena

BLOCK = 256  # an AVX-512 loop's vector block (16 float32 x 4 unrolled): the distance its alias check asks


def test_live_buffers_apart_and_dead_ones_reused():
    rng = np.random.default_rng(0)
    allocs = [Allocation(k, int(rng.choice([1, 4, 64, 200, 300, 5000])), int(f), int(f + rng.integers(0, 4)))
              for k, f in enumerate(rng.integers(0, 20, 60))]
    offsets, total = plan_arena(allocs)
    for a, b in itertools.combinations(allocs, 2):
        assert offsets[a.key] % ALIGNMENT == 0
        if a.first <= b.last and b.first <= a.last:  # alive together
            lo, hi = sorted((a, b), key=lambda x: offsets[x.key])
            assert offsets[hi.key] - offsets[lo.key] >= max(lo.nbytes, BLOCK)
    assert total < sum(max(a.nbytes, BLOCK) + ALIGNMENT for a in allocs)  # (space reused)
    chain = [Allocation(k, 64, k, k + 1) for k in range(10)]  # a chain of [1, 16] float32 tensors
    offsets, total = plan_arena(chain)
    assert total <= 3 * BLOCK and offsets[0] == offsets[2] != offsets[1]
