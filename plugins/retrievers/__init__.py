"""Built-in retrievers (used by retrieval-augmented task types)."""
