"""Elementwise ops: arithmetic, activations, comparison and logic, softmax, cast, quantize (float and integer variants
side by side).
"""
