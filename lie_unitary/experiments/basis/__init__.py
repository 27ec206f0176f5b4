"""Recovering a hidden subalgebra: many operators that share k generators of u(n)."""
