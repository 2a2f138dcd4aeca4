"""Shared building blocks of every kernel family: fixed-point arithmetic, vectorizable maths, ISA levels, LLVM IR
helpers, threads, broadcasting and activation ranges. Imports nothing of the families.
"""
