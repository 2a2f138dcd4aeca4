"""Sorts and heaps over arrays of indices, the order passed in as a function of (key, a, b): a stable merge sort
(UNIQUE, TOPK_V2, the NMS candidates of the detection post-processing) and libstdc++'s heap steps
(std::partial_sort and the NMS priority queue of the detection kernels); and std::upper_bound's search (BUCKETIZE,
MULTINOMIAL).

The kernels that use them must reproduce the official results where the order is not a strict weak ordering (NaN
values), so each algorithm is written as the reference it follows: the same comparisons in the same sequence.
These are inlined into the caller, and Numba compiles the order function's call there.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def stable_sort(order, tmp, n, run, before, key):
    """Sort order[:n] stably: an element moves ahead of another only when before(key, it, other). Runs of `run`
    elements are insertion-sorted first (run 1: none), then merged bottom-up in widths run, 2 run, ... through
    tmp[:n]; the result ends in order."""
    for lo in range(0, n, run):
        hi = min(lo + run, n)
        for i in range(lo + 1, hi):
            v = order[i]
            j = i
            while j > lo and before(key, v, order[j - 1]):
                order[j] = order[j - 1]
                j -= 1
            order[j] = v
    src, dst = order, tmp
    in_place = True
    width = run
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                # stable: take from the right run only when strictly before
                if before(key, src[j], src[i]):
                    dst[o] = src[j]
                    j += 1
                else:
                    dst[o] = src[i]
                    i += 1
                o += 1
            while i < mid:
                dst[o] = src[i]
                i += 1
                o += 1
            while j < hi:
                dst[o] = src[j]
                j += 1
                o += 1
        src, dst = dst, src
        in_place = not in_place
        width *= 2
    if not in_place:
        for i in range(n):
            order[i] = tmp[i]


@njit(cache=True, inline="always")
def sift_up(heap, hole, top, value, less, key):
    """libstdc++ __push_heap: move `value` up from `hole` while its parent is less (less(key, parent, value)), never
    above `top`."""
    parent = (hole - 1) // 2
    while hole > top and less(key, heap[parent], value):
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value


@njit(cache=True, inline="always")
def adjust_heap(heap, hole, length, value, less, key):
    """libstdc++ __adjust_heap on heap[:length]: move the hole at `hole` down to a leaf (to the child that is not
    less, the right one on a tie), then push `value` up from there (never above the starting hole)."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(key, heap[child], heap[child - 1]):
            child -= 1
        heap[hole] = heap[child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        heap[hole] = heap[child - 1]
        hole = child - 1
    sift_up(heap, hole, top, value, less, key)


@njit(cache=True, inline="always")
def upper_bound(a, n, v):
    """std::upper_bound over a[:n] with libstdc++'s halving search: the number of leading entries not greater than
    v when a is sorted (unordered entries or NaNs then give the official answer too)."""
    first = 0
    while n > 0:
        half = n >> 1
        if v < a[first + half]:
            n = half
        else:
            first += half + 1
            n -= half + 1
    return first
