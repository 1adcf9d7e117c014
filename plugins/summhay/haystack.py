"""The SummHay haystack: the official JSON schema, read and checked.

Schema as the authors publish it (salesforce/summary-of-a-haystack, README "Each Haystack
follows the following schema"): a topic with `topic_metadata` (conversations: the
`participants`), `subtopics` (each with `subtopic_id`, `subtopic`, `query`, `insights` of
`insight_id`/`insight`, and optionally the scores of the authors' retrievers under
`retriever: {name: {document_id: score}}`), and `documents` (each with `document_id`,
`document_text`, `insights_included`).

Document numbers are 1-based positions in the file's `documents` list: the summarization
prompt labels a document "Conversation {idx+1}" / "Article {idx+1}" and the scorer's
`build_ref_insight2docids` maps insights to `i + 1` (utils_eval.py), whatever order the
documents are later shown in. Every citation in this plugin uses that number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.io import read_json

DOMAINS = ("conversation", "news")
#: JSON files that may sit next to haystacks but are not ones (data-home record, annotations)
NOT_HAYSTACKS = frozenset({"CHECKSUMS.json", "eval_benchmark_data.json"})
HINT = ("Put haystack JSON files there (the authors' data/topic_*.json), or pass "
        "--set options.haystack=FILE_OR_FOLDER; a demo one: lceval summhay synth --template FILE")


@dataclass
class Insight:
    insight_id: str
    text: str
    name: str = ""


@dataclass
class Subtopic:
    subtopic_id: str
    subtopic: str
    query: str
    insights: list[Insight]
    #: the authors' stored retriever scores, {retriever: {document_id: score}}
    retriever_scores: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Document:
    document_id: str
    number: int  # 1-based position in the file: the id the model cites as [number]
    text: str
    insights_included: list[str]


@dataclass
class Haystack:
    topic_id: str
    topic: str
    domain: str  # "conversation" | "news"
    participants: list[str]
    subtopics: list[Subtopic]
    documents: list[Document]
    path: Path | None = None

    def gold_cites(self) -> dict[str, set[int]]:
        """insight_id -> numbers of the documents that include it (utils_eval.build_ref_insight2docids)."""
        out: dict[str, set[int]] = {}
        for doc in self.documents:
            for iid in doc.insights_included:
                out.setdefault(iid, set()).add(doc.number)
        return out

    def relevance(self, subtopic: Subtopic) -> list[int]:
        """Per document, how many of the subtopic's insights it holds: the Oracle score of
        §5.1 and the `label_{subtopic_id}` of the authors' utils_topic.load_topic."""
        ids = {i.insight_id for i in subtopic.insights}
        return [sum(1 for iid in d.insights_included if iid in ids) for d in self.documents]

    def insights_discussed(self, subtopic: Subtopic) -> list[Insight]:
        """Insights of the subtopic that at least one document holds. The news prompt asks for
        this many bullets (populate_summaries.get_insights_discussed)."""
        present = {iid for d in self.documents for iid in d.insights_included}
        return [i for i in subtopic.insights if i.insight_id in present]


def _need(obj: Any, key: str, kind: type | tuple[type, ...], path: Path | None, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise UserError(f"haystack lacks '{key}'", file=path, field=f"{where}{key}")
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise UserError(f"'{key}' must be a {names}, got {type(value).__name__}", file=path,
                        field=f"{where}{key}")
    return value


def guess_domain(data: dict[str, Any]) -> str:
    """Conversation haystacks list participants in `topic_metadata`; news ones list articles."""
    meta = data.get("topic_metadata") or {}
    if isinstance(meta, dict) and meta.get("participants"):
        return "conversation"
    return "news"


def parse_haystack(data: Any, path: Path | None = None, domain: str | None = None) -> Haystack:
    """Check `data` against the official schema; errors name the file and the field."""
    if not isinstance(data, dict):
        raise UserError("a haystack must be a JSON object", file=path)
    topic = _need(data, "topic", str, path, "")
    meta = data.get("topic_metadata") or {}
    if not isinstance(meta, dict):
        raise UserError("'topic_metadata' must be an object", file=path, field="topic_metadata")
    participants = meta.get("participants") or []
    if not isinstance(participants, list) or not all(isinstance(p, str) for p in participants):
        raise UserError("'participants' must be a list of strings", file=path,
                        field="topic_metadata.participants")
    domain = domain or data.get("domain") or guess_domain(data)
    if domain not in DOMAINS:
        raise UserError(f"unknown domain '{domain}' (known: {', '.join(DOMAINS)})", file=path,
                        field="domain")
    subtopics: list[Subtopic] = []
    seen_insights: set[str] = set()
    for si, st in enumerate(_need(data, "subtopics", list, path, "")):
        where = f"subtopics[{si}]."
        insights = []
        for ii, ins in enumerate(_need(st, "insights", list, path, where)):
            iw = f"{where}insights[{ii}]."
            iid = str(_need(ins, "insight_id", (str, int), path, iw))
            if iid in seen_insights:
                raise UserError(f"duplicate insight_id '{iid}'", file=path, field=f"{iw}insight_id")
            seen_insights.add(iid)
            insights.append(Insight(iid, _need(ins, "insight", str, path, iw), str(ins.get("insight_name", ""))))
        if not insights:
            raise UserError("a subtopic needs at least one insight", file=path, field=f"{where}insights")
        scores = st.get("retriever") or {}
        if not isinstance(scores, dict):
            raise UserError("'retriever' must map retriever names to {document_id: score}", file=path,
                            field=f"{where}retriever")
        subtopics.append(Subtopic(
            subtopic_id=str(_need(st, "subtopic_id", (str, int), path, where)),
            subtopic=_need(st, "subtopic", str, path, where),
            query=_need(st, "query", str, path, where),
            insights=insights,
            retriever_scores={k: dict(v) for k, v in scores.items() if isinstance(v, dict)},
        ))
    if not subtopics:
        raise UserError("a haystack needs at least one subtopic", file=path, field="subtopics")
    documents: list[Document] = []
    seen_docs: set[str] = set()
    for di, doc in enumerate(_need(data, "documents", list, path, "")):
        where = f"documents[{di}]."
        did = str(_need(doc, "document_id", (str, int), path, where))
        if did in seen_docs:
            raise UserError(f"duplicate document_id '{did}'", file=path, field=f"{where}document_id")
        seen_docs.add(did)
        included = _need(doc, "insights_included", list, path, where)
        unknown = [str(i) for i in included if str(i) not in seen_insights]
        if unknown:
            raise UserError(f"insights_included names unknown insight(s) {', '.join(unknown[:3])}",
                            file=path, field=f"{where}insights_included")
        documents.append(Document(did, di + 1, _need(doc, "document_text", str, path, where),
                                  [str(i) for i in included]))
    if not documents:
        raise UserError("a haystack needs at least one document", file=path, field="documents")
    return Haystack(topic_id=str(data.get("topic_id", path.stem if path else "haystack")), topic=topic,
                    domain=domain, participants=list(participants), subtopics=subtopics,
                    documents=documents, path=path)


def load_haystack(path: Path, domain: str | None = None) -> Haystack:
    path = Path(path)
    if not path.exists():
        raise UserError("haystack file not found", file=path, hint=HINT)
    return parse_haystack(read_json(path, what="haystack"), path, domain)


def haystack_files(location: Path) -> list[Path]:
    """A haystack file, or every `*.json` haystack in a folder (sorted, stable order)."""
    location = Path(location)
    if location.is_file():
        return [location]
    if location.is_dir():
        files = sorted(p for p in location.glob("*.json")
                       if not p.name.startswith(".") and p.name not in NOT_HAYSTACKS)
        if files:
            return files
    # data not here (not bad data): the engine adds the command that installs it, and pack/unpack
    raise DataMissing("no haystack JSON file here", file=location, hint=HINT)
