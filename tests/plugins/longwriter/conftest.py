"""An offline, isolated Hugging Face cache for the family's spec tests (the documents tests' own)."""

from tests.plugins.documents.conftest import _isolated_hf  # noqa: F401 - an autouse fixture
