"""Reductions: reduce ops, pooling, normalization, segment ops, top-k.
"""
