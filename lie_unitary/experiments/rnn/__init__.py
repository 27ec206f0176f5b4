"""Unitary RNNs on the adding and memory problems (paper §4)."""
