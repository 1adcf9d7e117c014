"""A stub NLI judge for the citation metrics' tests (the same interface as any NLI model:
`nli_kind: python`): a claim is entailed when it names at least one value `V<digits>` and
every value it names is in the premise."""

from __future__ import annotations

import re


def entails(premise: str, hypothesis: str) -> bool:
    values = re.findall(r"V\d+", hypothesis)
    return bool(values) and all(v in premise for v in values)
