"""LongWriter (Bai et al., 2024; THUDM/LongWriter, `evaluation/`): LongBench-Write, 120 writing
requests of 100 to 20,000 words (and LongWrite-Ruler, 48 requests of 1,000 to 30,000), scored by
how close the answer's length is to the one asked (the length score S_l) and by a GPT-4o judge's
six 1-5 ratings (the quality score S_q). The `longwriter` task type is the `documents` type with
each request's length range and language; the `longwriter_length` judge is eval_length.py's
score, the `longwriter` judge eval_quality.py's judge and (S_l + S_q) / 2."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import LongWriterTaskType

    register("longwriter", LongWriterTaskType())


@hookimpl
def register_judges(register):
    from .metric import LongWriterJudge, LongWriterLengthJudge

    register(LongWriterLengthJudge.name, LongWriterLengthJudge, options_schema=LongWriterLengthJudge.OPTIONS)
    register(LongWriterJudge.name, LongWriterJudge, options_schema=LongWriterJudge.OPTIONS)
