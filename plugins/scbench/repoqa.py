"""SCBench's Code.RepoQA score: the described function, retrieved from the repository, must
be closer to it than to every other needle of that repository, and at least 0.8 similar.

Follows microsoft/MInference, commit fb56c917f618e8645f1cfc37535afd7424d78f0d,
scbench/repo_qa_utils.py (after evalplus/repoqa): `sanitize_output` (the first fenced code
block, or within the blocks the first function definition tree-sitter finds), then
`compute_function_similarity` (NLTK's sentence BLEU over white-space tokens, Chen and Cherry's
smoothing method 4) against every needle of the repository (`needle_evaluator`: the first
needle with the highest similarity wins ties), the turn passing when that needle is its own
function and the similarity reaches the threshold (compute_scores.py reports pass@1 at 0.8:
with one answer per turn, pass@1 is the share of turns that pass). The needles are all the
RepoQA turns of the same repository in the run (`needle_by_repo`), which the `documents`
task type gives every turn as its `answer_pool` metadata. Comments are kept
(`ignore_comments=False`). Parsing needs tree-sitter 0.21 and tree-sitter-languages
(`pip install 'lceval[scbench]'`).
"""

from __future__ import annotations

import re
from typing import Any

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

#: repo_qa_utils.py FUNCTION_QUERY: a function definition per language
FUNCTION_QUERY = {
    "python": "(function_definition name: (_)) @fdef",
    "java": "(method_declaration name: (_)) @fdef",
    "typescript": "(function_declaration name: (_)) @fdef",
    "rust": "(function_item name: (_)) @fdef",
    "cpp": "(function_definition declarator: (function_declarator declarator: (identifier))) @fdef",
    "go": "(function_declaration name: (_)) @fdef",
}
_BLOCK = re.compile(r"^```(?:\w+)?\s*\n(.*?)(?=^```)```", re.DOTALL | re.MULTILINE)
_TREE_SITTER: dict[str, tuple[Any, Any]] = {}


def _parser(lang: str) -> tuple[Any, Any]:
    """(parser, function query) of a language, built once."""
    if lang not in _TREE_SITTER:
        if lang not in FUNCTION_QUERY:
            raise UserError(f"RepoQA knows no language {lang!r} (known: {', '.join(FUNCTION_QUERY)})",
                            field="judge.options.task")
        try:
            import warnings

            with warnings.catch_warnings():  # tree-sitter 0.21 warns about the grammar loader it needs
                warnings.simplefilter("ignore", FutureWarning)
                from tree_sitter_languages import get_language, get_parser

                _TREE_SITTER[lang] = (get_parser(lang), get_language(lang).query(FUNCTION_QUERY[lang]))
        except ImportError:
            raise PackageMissing("the scbench metric parses RepoQA's code with tree-sitter, which is not installed",
                                 field="judge.options.task", hint="Run: pip install 'lceval[scbench]'") from None
    return _TREE_SITTER[lang]


def sanitize_output(model_output: str, lang: str) -> str:
    """repo_qa_utils.py `sanitize_output`: no code block, the output itself (stripped); else
    the first function definition tree-sitter finds in the blocks, in order, else the first
    block."""
    model_output = model_output.strip()
    blocks = _BLOCK.findall(model_output)
    if not blocks:
        return model_output
    parser, query = _parser(lang)
    for block in blocks:
        try:
            data = bytes(block, "utf8")
            for node, _ in query.captures(parser.parse(data).root_node):
                return data[node.start_byte:node.end_byte].decode("utf8")
        except Exception:  # noqa: BLE001 - the authors' bare except: a block that fails to parse is passed over
            pass
    return blocks[0]


def function_similarity(candidate: str, reference: str) -> float:
    """repo_qa_utils.py `compute_function_similarity`: sentence BLEU of white-space tokens,
    smoothing method 4."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    candidate_tokens = re.split(r"\s+", candidate.strip())
    reference_tokens = re.split(r"\s+", reference.strip())
    return float(sentence_bleu([reference_tokens], candidate_tokens, smoothing_function=SmoothingFunction().method4))


def needles_of(item: JudgeInput) -> list[tuple[str, str]]:
    """(name, code) of every RepoQA needle of the item's repository, from its `answer_pool`
    (entries of other tasks, as repoqa_and_kv's kv turns, left out)."""
    pool = item.metadata.get("answer_pool")
    if not isinstance(pool, list) or not pool:
        raise UserError(f"item {item.item_id}: RepoQA scores against the needles of the repository, and the item "
                        "has none (metadata `answer_pool`)", field="judge.options.task",
                        hint="Give the spec fields.answer_pool: {by: repo, keep: [name, task]}.")
    return [(str(e.get("name")), str(e.get("answer"))) for e in pool
            if isinstance(e, dict) and e.get("task", "scbench_repoqa") == "scbench_repoqa"]


def repoqa_pass(prediction: str, item: JudgeInput, threshold: float) -> tuple[bool, dict[str, Any]]:
    """repo_qa_utils.py `needle_evaluator` and the pass at `threshold`."""
    lang = str(item.metadata.get("lang"))
    name = item.metadata.get("name")
    sanitized = sanitize_output(prediction, lang)
    best_name, best = None, 0.0
    for needle_name, code in needles_of(item):
        similarity = function_similarity(sanitized, code)
        if similarity > best:
            best, best_name = similarity, needle_name
    ok = best_name == name and best >= threshold
    return ok, {"best_target": best_name, "best_similarity": best, "is_best_similar": best_name == name}
