"""Linear-algebra ops: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL; their loops, SIMD micro-kernels and
parallel drivers.
"""
