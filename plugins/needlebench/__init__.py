"""NeedleBench (Li et al., 2024; OpenCompass)."""
