"""docs/results.md names only the judge keys results.json has (issue 30): the identities it
quotes are the built-in judges' own, and the keys it lists for an LLM judge are the keys its
identity has."""

from __future__ import annotations

import json
import re

from lceval.engine import load_plugins
from lceval.interfaces import JudgeContext

from tests.paths import REPO


class _Model:
    """Just enough of a judge model for an LLM judge to say who it is."""

    slots = 1

    def identity(self) -> dict:
        return {"model": "judge-model"}

    def __getattr__(self, name):
        return None


def _judge_bullet() -> str:
    text = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    start = text.index("- `judge`: the judge's identity")
    return text[start:text.index("\n- ", start + 3)]


def _identity(name: str, **options) -> dict:
    return load_plugins().get("judge", name)(JudgeContext(options=options, model=_Model(), seed=0)).identity()


def test_the_identities_the_page_quotes_are_the_judges_own():
    bullet = _judge_bullet()
    quoted = [json.loads(m) for m in re.findall(r"`(\{[^`]*\})`", bullet.replace("\n  ", " "))]
    assert quoted, bullet
    for identity in quoted:
        assert _identity(identity["judge"]) == identity


def test_the_keys_the_page_lists_for_an_llm_judge_are_its_keys():
    bullet = _judge_bullet().replace("\n  ", " ")
    listed = re.search(r"an LLM judge \(`rubric`, `prometheus`\): (.*?);", bullet).group(1)
    keys = set(re.findall(r"`([a-z_0-9]+)`", listed))
    for name in ("rubric", "prometheus"):
        assert keys | {"judge"} == set(_identity(name)), name
