"""Experiments: the paper's operator learning (§3) and unitary RNNs (§4), one runner."""
