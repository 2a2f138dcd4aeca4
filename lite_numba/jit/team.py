"""How many workers the parallel drivers may use right now, and the policy that decides it per invoke.

With `num_threads=n > 1` prepare schedules parallel drivers (kernels/base/threads.py): each call starts a parallel
region whose workers take fixed chunks in turn, and the region ends when every chunk is done. When another process
holds a core, the OS deschedules a worker in the middle of a chunk and the region waits for it a whole time slice:
measured on a 2-vCPU Xeon with a spinning process beside the bench (and other work running), MobileNetV3-Small
int8 took 3.8x and face_detection_front 2.6x our own one-thread time at num_threads=2 (bench/test_latency.py
test_one_core_busy).

So the regions read a process-wide limit, the int64 behind the symbol TEAM_LIMIT_SYMBOL (registered with LLVM by
register_team_limit when kernels/base/threads.py is imported, before any kernel reading it is compiled or loaded): 0
lets every region use its workers, 1 makes it run its chunks one after the other on the calling thread. Every output
is computed by the same code whatever the limit (each chunk runs the serial kernel with worker 0's scratch), so
results are identical.

`TeamPolicy` wraps an allocated graph's run with num_threads > 1: it times every invoke, now and then runs a few
with the other setting (a probe, recording its last invoke; from the second invoke on, then ever more rarely while
the probes confirm the choice),
and runs the next invokes with the setting whose recent median is lower. On a quiet machine the workers win and the
probes cost at most 1/MAX_INTERVAL of the difference; with a core taken the serial runs win within a few invokes.
The limit is set for the duration of the run and cleared after it (interpreters invoked from several Python threads
at once may see each other's setting: only their speed can change, not their results).
"""

from __future__ import annotations

import ctypes
import time
from collections import deque

TEAM_LIMIT_SYMBOL = "lite_numba_team_limit"
# the int64 words behind the symbol: word 0 the limit, the others kernels/base/team_pool.py's worker pool
TEAM_WORDS = 128
_STATE = (ctypes.c_int64 * TEAM_WORDS)()


def team_limit_address() -> int:
    """The address of the int64 behind TEAM_LIMIT_SYMBOL (for a loader resolving it without LLVM: jit/native_loader)."""
    return ctypes.addressof(_STATE)


def team_state():
    """The state words (a ctypes array; word 0 the limit)."""
    return _STATE


def register_team_limit() -> str:
    """Make TEAM_LIMIT_SYMBOL resolvable by LLVM in this process (kernels/base/threads.py calls it at import, before
    any kernel that reads the limit is compiled or loaded); returns the symbol's name."""
    from llvmlite import binding  # lazy: `import lite_numba` loads no compiler (tests/test_startup_cache.py)

    binding.add_symbol(TEAM_LIMIT_SYMBOL, ctypes.addressof(_STATE))
    return TEAM_LIMIT_SYMBOL

# probes of the setting not in use: the second invoke, then at intervals that double while probes confirm the choice
# (up to MAX_INTERVAL invokes) and drop back to 2 when a probe beats the setting in use, so a change of load is
# confirmed within a few invokes, and on a steady machine the probes cost 1 / MAX_INTERVAL of the difference
MAX_INTERVAL = 1024
# a probe runs the other setting for one warm-up invoke, or up to PROBE_WARM_MAX of them while less than
# PROBE_WARM_NS has passed, then records the next: the warm-up invokes wake it up. team_pool's workers sleep 0.1 ms
# after a region, and a 2-vCPU VM took 20 us to over 1 ms to run a halted vCPU again (the first invoke after 5-500 ms
# idle 350-760 us, the next ones 265-300, MobileNetV2 0.35/96 f32): one-invoke probes of the workers after serial
# invokes measured that.
# More warm-up invokes cost more where the workers lose (one core busy: with up to 8, small_cnn_int8 took 1.21-1.55x
# its one-thread time, with 3 1.15-1.17)
PROBE_WARM_NS = 1_000_000
PROBE_WARM_MAX = 3
# samples kept per setting: the setting in use keeps its last RECENT invokes, the other its last RECENT probes, and
# the medians are compared (a preempted invoke takes a whole time slice: the median ignores up to two in five)
RECENT = 5
# and after a probe that lost (the setting in use stayed faster) the next one waits, beyond its interval, until the
# invokes since have taken PROBE_BUDGET times what it cost beyond as many invokes of the setting in use, so losing
# probes cost at most ~1 / PROBE_BUDGET of the time whatever their price: with one core busy each invoke of a probe
# of the workers can wait a time slice (ms), which on a 35-45 us model (small_cnn) was 10-30 % of the time at a
# 1,024-invoke interval. (Budgeting a probe's whole cost instead kept hand_landmark_lite (5 ms an invoke) on one
# thread through the 2-thread bench: one unlucky probe then barred the next for 100 invokes.)
PROBE_BUDGET = 50


_FORCED: list[int | None] = [None]


def force_team_limit(n: int | None) -> None:
    """Fix the limit for every invoke from now on (0: parallel regions use their workers; 1: they run on the calling
    thread), or give the choice back to the policies (None). For tests and for measuring either setting."""
    _FORCED[0] = None if n is None else int(n)
    _STATE[0] = _FORCED[0] or 0


def team_limit() -> int:
    """The limit in force (0 or 1)."""
    return _STATE[0]


class TeamPolicy:
    """A graph's `run` for num_threads > 1 (see the module doc): `TeamPolicy(run)()` runs it with the setting that has
    been faster, probing the other now and then. `clock` returns nanoseconds (tests pass their own); a probe warms the
    other setting up for `warm_ns` before the invoke it records."""

    def __init__(self, run, clock=time.perf_counter_ns, warm_ns: int = PROBE_WARM_NS, budget: int = PROBE_BUDGET):
        self.inner = run
        self.clock = clock
        self.warm_ns = warm_ns
        self.budget = budget
        self.serial = False  # the setting in use
        self.recent = (deque(maxlen=RECENT), deque(maxlen=RECENT))  # ns: [workers, serial]
        self.medians: list[float | None] = [None, None]  # of recent[0], recent[1]
        self.count = 0
        self.interval = 1
        self.next_probe = 2
        self.probe_n = 0  # invokes into the probe running (0: none)
        self.probe_t0 = 0
        self.probe_cost = 0  # ns: the last probe's invokes
        self.spent = 0  # ns: invokes with the setting in use since the last probe
        self.gate = 0  # ns: spent before the next probe may start

    def __call__(self) -> None:
        if _FORCED[0] is not None:
            return self.inner()
        self.count += 1
        probe = self.probe_n > 0 or (self.count >= self.next_probe and self.spent >= self.gate)
        serial = int(self.serial != probe)
        _STATE[0] = serial
        t0 = self.clock()
        try:
            self.inner()
        finally:
            _STATE[0] = 0
        dt = self.clock() - t0
        if not probe:
            self.spent += dt
        else:
            self.probe_n += 1
            if self.probe_n == 1:
                self.probe_t0, self.probe_cost = t0, 0
            self.probe_cost += dt
            warming = self.probe_n <= PROBE_WARM_MAX and t0 - self.probe_t0 < self.warm_ns
            if self.probe_n == 1 or warming:
                return  # a probe's first invokes wake the other setting up (sleeping workers): not recorded
            n, self.probe_n = self.probe_n, 0
            prev = self.recent[1 - serial]
            in_use = self.medians[1 - serial] = _median(prev) if prev else None
            promising = in_use is None or dt < in_use
            self.interval = 2 if promising else min(2 * self.interval, MAX_INTERVAL)
            self.next_probe = self.count + self.interval
            self.spent = 0
            self.gate = 0 if promising else self.budget * max(0, self.probe_cost - n * in_use)
        recent = self.recent[serial]
        full = len(recent) == RECENT
        recent.append(dt)
        other = self.medians[1 - serial]  # (the setting not in use: its median is updated at every probe)
        if other is None:
            return
        if full and not probe and (dt < other if serial else dt <= other):
            # the choice holds: 3 of the 5 samples were on its side of `other`, and the new one is too (the median
            # of the setting in use is then left stale: the next probe recomputes it)
            return
        m = self.medians[serial] = _median(recent)
        self.serial = (m < other) if serial else (other < m)


def _median(values) -> float:
    """statistics.median of a few numbers, at a third of its cost (TeamPolicy runs it on every invoke)."""
    s = sorted(values)
    h = len(s) // 2
    return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2
