"""How much prefill the scheduler saves on a real model.

Runs the first QUESTIONS questions of each of the MEETINGS shortest ELITR-Bench meetings
through a llama.cpp model twice, with the same requests in two orders:

- grouped: as lceval's scheduler sends them (a meeting's questions back to back), and
- interleaved: round-robin over meetings, what a harness that ignores shared prefixes does.

It reports prompt tokens, tokens actually prefilled (counted by the backend from its KV
cache) and wall seconds for each order. Counts are stable across machines; seconds are not.

    python benchmarks/prefill_scheduling.py --data-home DIR [--model smollm2] [--meetings 2] [--questions 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lceval.context import fill_context, full_transcript
from lceval.interfaces import TaskContext
from lceval.models import make_model, parse_model_spec
from lceval.plugins import load_plugins
from lceval.registry import load_registry
from lceval.scheduler import ConversationState, schedule
from lceval.types import ContextCut, GenerationParams, GenerationRequest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--meetings", type=int, default=2)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()

    plugins = load_plugins()
    registry = load_registry(plugins)
    spec = registry.spec("elitr_qa")
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=Path(args.data_home), splits=None,
                      limit=None, record_file=lambda p: None)
    convs = plugins.get("task-type", "elitr").load(ctx)
    by_meeting: dict[str, list] = {}
    for c in convs:
        by_meeting.setdefault(c.context_id, []).append(c)
    shortest = sorted(by_meeting, key=lambda m: len(by_meeting[m][0].context))[: args.meetings]
    chosen = [c for m in shortest for c in by_meeting[m][: args.questions]]

    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    cut = ContextCut("error", None, None)
    states = [ConversationState(conv=c, context=c.context, cut=cut) for c in chosen]
    grouped = []
    for wave in schedule(states):
        for st in wave:
            grouped.append(st.conv)
            st.finish_skipped()
    interleaved = [by[i] for i in range(args.questions) for by in
                   ([c for c in chosen if c.context_id == m] for m in shortest) if i < len(by)]

    model_spec = parse_model_spec(args.model, registry)
    for name, order in (("grouped", grouped), ("interleaved", interleaved)):
        backend = make_model(model_spec, plugins)  # fresh: no KV cache carried between orders
        requests = [GenerationRequest(request_id=c.conv_id, params=params,
                                      messages=fill_context(full_transcript(c, [], upto=0), c.context))
                    for c in order]
        start = time.perf_counter()
        gens = backend.generate(requests)
        seconds = time.perf_counter() - start
        backend.close()
        prompt = sum(g.prompt_tokens for g in gens)
        prefilled = sum(g.prefilled_tokens for g in gens)
        print(f"{name:12s} requests={len(gens)} prompt_tokens={prompt} prefilled_tokens={prefilled} "
              f"({prefilled / prompt:.1%}) seconds={seconds:.1f}")


if __name__ == "__main__":
    main()
