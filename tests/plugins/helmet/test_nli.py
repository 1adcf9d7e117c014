"""The citation metrics' NLI option loads real transformers models through the same interface as
the authors' TRUE (seq2seq: "premise: ... hypothesis: ...", entailed iff it writes "1") and as any
sequence-classification NLI model: here tiny randomly initialised ones built in the test (nothing
is downloaded), so the verdicts are arbitrary and the test checks the plumbing, not the numbers."""

from __future__ import annotations

import pytest

from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput

from .helpers import PLUGINS, load
from .test_metrics import punkt  # noqa: F401 - a fixture

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def tokenizer(folder):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "</s>", "<unk>", "[CLS]", "[SEP]", "premise:", "hypothesis:", "1", "0", "Title:"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   cls_token="[CLS]", sep_token="[SEP]")
    fast.save_pretrained(str(folder))
    return len(words)


def t5(folder):
    vocab = tokenizer(folder)
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=vocab, d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    transformers.T5ForConditionalGeneration(config).save_pretrained(str(folder))
    return str(folder)


def classifier(folder):
    vocab = tokenizer(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, num_labels=3,
                                     id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"},
                                     label2id={"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2})
    transformers.BertForSequenceClassification(config).save_pretrained(str(folder))
    return str(folder)


@pytest.mark.parametrize("kind,build", [("seq2seq", t5), ("classification", classifier)])
def test_a_local_nli_model_scores_citations(kind, build, tmp_path, punkt):  # noqa: F811
    model = build(tmp_path / kind)
    (conv, *_) = load("helmet_asqa", ["8k"], max_test_samples=1)
    item = JudgeInput(item_id="8k/0", question=conv.turns[0].question, response="Thing has value V00 [1]. Also V01 [2].",
                      reference="", metadata=conv.turns[0].metadata)
    judge = PLUGINS.judges["helmet_alce"](JudgeContext(options={
        "metric": "citation_rec", "nli_model": model, "nli_kind": kind, "device": "cpu", "nli_dtype": "float32"}))
    (j,) = judge.judge([item])
    assert j.parse_status == "ok" and 0.0 <= j.score <= 100.0 and j.details["sentences"] == 2


def test_an_nli_model_without_an_entailment_label_is_refused(tmp_path):
    from lceval.errors import UserError
    from lceval_plugins.helmet.alce import load_nli

    folder = tmp_path / "bad"
    classifier(folder)
    config = transformers.AutoConfig.from_pretrained(str(folder))
    config.id2label, config.label2id = {0: "a", 1: "b", 2: "c"}, {"a": 0, "b": 1, "c": 2}
    config.save_pretrained(str(folder))
    with pytest.raises(UserError, match="entailment"):
        load_nli(str(folder), "classification", "cpu", "float32", "entailment")
