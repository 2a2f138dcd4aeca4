"""Sequence ops: LSTM, RNN, SVDF (float, hybrid and fully integer).
"""
