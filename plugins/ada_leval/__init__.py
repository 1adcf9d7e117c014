"""Ada-LEval (Wang et al., 2024; open-compass/Ada-LEval): length-adaptable tasks, TSort (put four
shuffled segments of a book back in order) and BestAnswer (pick the most helpful of many answers to
a StackExchange question), each at its length levels. The specs (tasks/ada_leval/) are
`documents_by_length` specs over the authors' files; this plugin holds their answer extraction and
accuracy (`ada_leval_bestanswer`, `ada_leval_tsort`) and the `ada_leval` dataset (`lceval data fetch
ada_leval --from FOLDER` converts the files `fetch_data.sh` downloads)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import BestAnswerJudge, TSortJudge

    for judge in (BestAnswerJudge, TSortJudge):
        register(judge.name, judge, options_schema=judge.OPTIONS)


@hookimpl
def register_datasets(register):
    from .dataset import ada_leval_dataset

    register(ada_leval_dataset())
