"""LongMemEval (Wu et al., 2025): long-term memory of a chat assistant."""
