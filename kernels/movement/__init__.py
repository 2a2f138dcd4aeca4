"""Data movement: gather/scatter, slice, pad, concat/split, reshape, transpose, tile, space/depth, resize, generators,
sparse.
"""
