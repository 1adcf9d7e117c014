"""GraphWalks (OpenAI, 2025; Hugging Face dataset `openai/graphwalks`): multi-hop reasoning over a
graph given as a long list of directed edges, BFS and parents problems. The data is a
`documents` spec (tasks/graphwalks/); this plugin is its metric, the dataset card's answer
parsing and set F1 (`graphwalks` judge)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import GraphWalksJudge

    register(GraphWalksJudge.name, GraphWalksJudge, options_schema=GraphWalksJudge.OPTIONS)
