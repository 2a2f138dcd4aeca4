"""Signal processing: FFT, audio front ends, detection post-processing.
"""
