"""Where the tests find the repository, their own fixtures and the shared real data."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
#: small fixtures written by us (tests/data)
TEST_DATA = REPO / "tests" / "data"
#: the real datasets beside the checkout (or $LCEVAL_SHARED_DATASETS)
SHARED = Path(os.environ.get("LCEVAL_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))


@contextmanager
def benchmark_script(name: str) -> Iterator[ModuleType]:
    """benchmarks/NAME.py as a module, registered under NAME while in use (dataclasses look
    their module up)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
