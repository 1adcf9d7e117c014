"""Loading a shipped HELMET spec over our rows (tests/data/helmet/home, HELMET's file layout)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from tests.paths import TEST_DATA

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
HOME = TEST_DATA / "helmet" / "home"


def load(name: str, splits: list[str] | None = None, home: Path = HOME, model: Any = None, limit: int | None = None,
         **options: Any) -> list[Conversation]:
    """The conversations of spec `name` (its options updated), read from `home`."""
    spec = CATALOG.spec(name)
    task_type = check_spec(spec, PLUGINS)
    data = {**spec.data, "options": {**spec.data["options"], **options}}
    ctx = TaskContext(spec=data, spec_path=spec.path, data_home=home, splits=splits, limit=limit,
                      record_file=lambda p: None, model_tokenizer=lambda: model)
    return task_type.load(ctx)


def prompt(conv: Conversation) -> str:
    """The user message as sent (the context in its place)."""
    return conv.turns[0].user.replace(CONTEXT_SLOT, conv.context, 1)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
