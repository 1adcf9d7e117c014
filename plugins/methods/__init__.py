"""Long-context methods a backend applies as a model setting (lceval.methods)."""
