"""Counting-Stars (Song et al., 2024)."""
