"""Where the tests find the repository, their own fixtures and the shared real data."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: small fixtures written by us (tests/data)
TEST_DATA = REPO / "tests" / "data"
#: the real datasets beside the checkout (or $LCEVAL_SHARED_DATASETS)
SHARED = Path(os.environ.get("LCEVAL_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))
