"""One digest of a task type's generated samples: every field of every conversation (ids, the
context, the preamble, each turn's prompt, answer prefix, reference and metadata), as canonical
JSON. The synthetic families pin theirs, so moving how their haystacks are built (issue 40: one
shared builder) provably changes no prompt by a byte."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Iterable


def samples_digest(conversations: Iterable[Any]) -> str:
    rows = [dataclasses.asdict(c) for c in conversations]
    text = json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
