"""lceval: evaluation harness for long-context language models."""

from lceval.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["hookimpl", "__version__"]
