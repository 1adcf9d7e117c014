"""RULER's qa_1 / qa_2 on tiny SQuAD and HotpotQA files we wrote in their formats
(tests/data/ruler/qa): documents and questions read as RULER's qa.py reads them (compared with
its functions, transcribed below from NVIDIA/RULER c3f5e3b4 scripts/data/synthetic/qa.py,
Apache-2.0), the distractor filling of its `generate_input_output`, samples built to their
length, the data's pinned checksums, and the command a missing dataset names."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from lceval.errors import DataMissing, UserError
from lceval.types import CONTEXT_SLOT
from lceval_plugins.ruler.qa import DATASETS, DOCUMENT_PROMPT, documents_for, read_hotpotqa, read_squad
from tests.cli import call
from tests.conftest import ScriptedModel
from tests.plugins.ruler.test_generators import load

FIXTURES = Path(__file__).parents[2] / "data" / "ruler" / "qa"
#: NVIDIA/RULER c3f5e3b4 scripts/data/synthetic/constants.py, TASKS['qa']['template'] (its answer prefix: " Answer:")
RULER_QA_TEMPLATE = ("Answer the question based on the given documents. Only give me the answer and do not output any "
                     "other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on "
                     "the given documents. Only give me the answer and do not output any other words.\n\nQuestion: "
                     "{query}")


# -- RULER's qa.py, transcribed (reads a parsed file instead of a path) ------------------------
def ruler_read_squad(data):
    total_docs = [p['context'] for d in data['data'] for p in d['paragraphs']]
    total_docs = sorted(list(set(total_docs)))
    total_docs_dict = {c: idx for idx, c in enumerate(total_docs)}
    total_qas = []
    for d in data['data']:
        more_docs = [total_docs_dict[p['context']] for p in d['paragraphs']]
        for p in d['paragraphs']:
            for qas in p['qas']:
                if not qas['is_impossible']:
                    total_qas.append({
                        'query': qas['question'],
                        'outputs': [a['text'] for a in qas['answers']],
                        'context': [total_docs_dict[p['context']]],
                        'more_context': [idx for idx in more_docs if idx != total_docs_dict[p['context']]]
                    })
    return total_qas, total_docs


def ruler_read_hotpotqa(data):
    total_docs = [f"{t}\n{''.join(p)}" for d in data for t, p in d['context']]
    total_docs = sorted(list(set(total_docs)))
    total_docs_dict = {c: idx for idx, c in enumerate(total_docs)}
    total_qas = []
    for d in data:
        total_qas.append({
            'query': d['question'],
            'outputs': [d['answer']],
            'context': [total_docs_dict[f"{t}\n{''.join(p)}"] for t, p in d['context']],
        })
    return total_qas, total_docs


def ruler_docs(QAS, DOCS, index, num_docs, seed):
    """generate_input_output's documents and context, random.sample's draws aside."""
    curr_docs = QAS[index]['context']
    curr_more = QAS[index].get('more_context', [])
    if num_docs < len(DOCS):
        if (num_docs - len(curr_docs)) > len(curr_more):
            addition_docs = [i for i, d in enumerate(DOCS) if i not in curr_docs + curr_more]
            all_docs = curr_docs + curr_more + random.sample(addition_docs, max(0, num_docs - len(curr_docs) - len(curr_more)))
        else:
            all_docs = curr_docs + random.sample(curr_more, num_docs - len(curr_docs))
        chosen = list(all_docs)
        all_docs = [DOCS[idx] for idx in all_docs]
    else:
        repeats = (num_docs + len(DOCS) - 1) // len(DOCS)
        all_docs = (DOCS * repeats)[:num_docs]
        chosen = None
    random.Random(seed).shuffle(all_docs)
    context = '\n\n'.join([DOCUMENT_PROMPT.format(i=i + 1, document=d) for i, d in enumerate(all_docs)])
    return chosen, all_docs, context
# -----------------------------------------------------------------------------------------------


def _data(name: str):
    return json.loads((FIXTURES / name).read_text())


def test_documents_and_questions_are_read_as_rulers_qa_reads_them():
    for ours, theirs, name in ((read_squad, ruler_read_squad, "dev-v2.0.json"),
                               (read_hotpotqa, ruler_read_hotpotqa, "hotpot_dev_distractor_v1.json")):
        corpus = ours(_data(name))
        qas, docs = theirs(_data(name))
        assert corpus.docs == docs
        assert [(q.query, q.outputs, q.context, q.more) for q in corpus.questions] == \
            [(q["query"], q["outputs"], q["context"], q.get("more_context", [])) for q in qas]
    squad = read_squad(_data("dev-v2.0.json"))
    assert len(squad.docs) == 7 and len(squad.questions) == 6  # a paragraph in two articles; 2 impossible left out


def test_distractors_fill_as_rulers_generate_input_output():
    corpus = read_squad(_data("dev-v2.0.json"))
    qas, docs = ruler_read_squad(_data("dev-v2.0.json"))
    rest_of = lambda q: [i for i in range(len(docs)) if i not in q.context + q.more]  # noqa: E731
    for index, question in enumerate(corpus.questions):
        for num_docs in range(1, 3 * len(docs)):
            ours = documents_for(corpus, question, num_docs, rest_of(question))
            theirs, _, context = ruler_docs(qas, docs, index, num_docs, seed=7)
            if theirs is None:  # past the corpus: the whole corpus, repeated in its order
                assert ours == [i % len(docs) for i in range(num_docs)]
                shuffled = [docs[i] for i in ours]
                random.Random(7).shuffle(shuffled)
                assert "\n\n".join(DOCUMENT_PROMPT.format(i=i + 1, document=d) for i, d in enumerate(shuffled)) == context
                continue
            # the question's own paragraph first, its article's next, drawn others last: the same
            # documents where RULER draws none, the same kinds and number where it draws
            assert len(ours) == len(theirs) == num_docs and ours[:len(question.context)] == question.context
            more = set(question.more)
            assert sum(i in more for i in ours) == sum(i in more for i in theirs)
            assert len(set(ours)) == len(ours)


def _home(tmp_path: Path, which: str) -> Path:
    dataset = DATASETS[which]
    folder = tmp_path / "home" / dataset.name
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / dataset.files[0].name, folder)
    return tmp_path / "home"


@pytest.mark.parametrize("which", ["squad", "hotpotqa"])
def test_samples_hold_rulers_prompt_and_as_many_documents_as_the_length_fits(tmp_path, which):
    home = _home(tmp_path, which)
    files: list = []
    model = ScriptedModel(window=8192)
    convs = load("ruler_qa", {"dataset": which, "num_samples": 3}, 512, model=model, limit=3, home=home, files=files)
    corpus = (read_squad if which == "squad" else read_hotpotqa)(_data(DATASETS[which].files[0].name))
    assert [p.name for p in files] == [DATASETS[which].files[0].name]  # recorded for the run
    for i, conv in enumerate(convs):
        turn, question = conv.turns[0], corpus.questions[i]
        meta = turn.metadata
        assert meta["references"] == question.outputs and turn.assistant_prefix == " Answer:"
        assert turn.user.startswith("Answer the question based on the given documents.") and \
            turn.user.endswith(f"Question: {question.query}")
        assert conv.context.startswith("Document 1:\n")
        assert conv.context.count("\nDocument ") == meta["num_docs"] - 1  # "Document {i}:" per document
        for own in question.context:  # the question's own documents are always there
            assert corpus.docs[own] in conv.context
        # as many documents as fit: within the length, short of it by less than the longest document
        longest = max(len(d.split()) for d in corpus.docs) + 8
        assert 512 - longest <= meta["length_built"] <= 512, meta
        assert meta["num_docs"] > len(corpus.docs) and meta["corpus_passes"] >= 2  # a small corpus: repeated
        # past the corpus RULER draws nothing: the prompt is RULER's, to the character
        qas, docs = (ruler_read_squad if which == "squad" else ruler_read_hotpotqa)(_data(DATASETS[which].files[0].name))
        _, _, context = ruler_docs(qas, docs, i, meta["num_docs"], seed=0)
        assert conv.context == context
        assert turn.user.replace(CONTEXT_SLOT, context) + turn.assistant_prefix == RULER_QA_TEMPLATE.format(
            context=context, query=question.query) + " Answer:"
    smaller = load("ruler_qa", {"dataset": which, "num_samples": 3}, 256, model=model, limit=1, home=home)
    assert smaller[0].turns[0].metadata["num_docs"] < convs[0].turns[0].metadata["num_docs"]
    with pytest.raises(UserError) as err:  # sample i is question i: no more samples than questions
        load("ruler_qa", {"dataset": which, "num_samples": 100}, 512, model=model, limit=None, home=home)
    assert err.value.field == "options.num_samples" and f"has {len(corpus.questions)} answerable" in err.value.message


def test_a_missing_dataset_names_its_fetch_and_the_pins_refuse_other_files(tmp_path):
    with pytest.raises(DataMissing) as err:
        load("ruler_qa", {"dataset": "hotpotqa"}, 512, home=tmp_path)
    assert err.value.command == "lceval data fetch hotpotqa-dev-distractor"
    # our fixture is not the published SQuAD dev file: its checksum is refused, nothing installed
    code, _, err_text = call("data", "fetch", "squad-v2-dev", "--from", FIXTURES, "--data-home", tmp_path / "h")
    assert code == 2 and "checksum mismatch for 'dev-v2.0.json'" in err_text, err_text
    assert DATASETS["squad"].files[0].sha256 in err_text and not (tmp_path / "h" / "squad-v2-dev").exists()


def test_the_specs_are_rulers_qa_configs():
    for name, dataset in (("ruler_qa_1", "squad"), ("ruler_qa_2", "hotpotqa")):
        code, out, err = call("tasks", "show", name)
        assert code == 0 and f"dataset: {dataset}" in out and "mode: part" in out and "max_new_tokens: 32" in out, out
