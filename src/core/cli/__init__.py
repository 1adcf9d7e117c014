"""The `lceval` command line."""

from lceval.cli._main import main

__all__ = ["main"]
