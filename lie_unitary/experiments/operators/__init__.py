"""Learning a unitary operator from noisy pairs (paper §3)."""
