"""Honest accounting through the engine: tokens prefilled are unknown (None) where the backend
cannot tell, in samples, results, manifest and report tables, never the sum of the known
part; the run's seconds are its wall time, not the sum of overlapping requests (checked with
requests that surely overlap and report their own seconds, so no assert depends on the
machine's speed); the progress bar moves once per answer."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from lceval.cli import main
from lceval.interfaces import PrefixCache
from lceval.types import Generation, GenerationRequest

from tests.conftest import ScriptedModel, run_engine


class Unreported(ScriptedModel):
    """Reports no prefill for the questions of one meeting (as a server without cached-token
    counts would); takes `slots` requests at once, each reported to have taken `latency`
    seconds (none is slept). With `together`, every request waits until that many are in
    flight at once: they overlap for certain, whatever the machine's load."""

    def __init__(self, slots: int = 1, latency: float = 0.0, together: int | None = None) -> None:
        super().__init__()
        self.max_in_flight = slots
        self.prefix_cache = PrefixCache("none")
        self.latency = latency
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(together, timeout=60) if together else None

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        if self.barrier is not None:
            self.barrier.wait()  # a BrokenBarrierError if they never were all in flight together
        with self.lock:
            out = super().generate(requests)
        for request, gen in zip(requests, out):
            gen.seconds = self.latency
            if request.hints["meeting_id"] == "meeting_en_dev_902":
                gen.prefilled_tokens = None
        return out


def test_unknown_prefill_is_unknown_everywhere(tiny_home: Path, tmp_path: Path, capsys) -> None:
    run_dir, results, state = run_engine(Unreported(), "elitr_qa", tiny_home, tmp_path)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    unknown = [s for s in samples if s["metadata"]["meeting_id"] == "meeting_en_dev_902"]
    assert len(unknown) == 2 and all(s["prefilled_tokens"] is None for s in unknown)
    assert all(s["prefilled_tokens"] == 5 for s in samples if s not in unknown)
    # the known five answers' 25 tokens are not passed off as the total
    assert state.usage["prefilled_tokens"] is None and state.usage["prefill_unknown"] == 2
    tokens = results["tasks"]["elitr_qa"]["accounting"]["tokens"]
    assert tokens["prefilled"] is None and tokens["prefill_unknown"] == 2
    assert tokens["prompt"] == sum(s["prompt_tokens"] for s in samples) > 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["prefilled_tokens"] is None
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Tokens")]
    assert len(rows) == 1 and rows[0].split(",")[2:5] == [str(tokens["prompt"]), "", str(tokens["completion"])]


def test_known_prefill_adds_up(tiny_home: Path, tmp_path: Path) -> None:
    _, results, state = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert state.usage["prefilled_tokens"] == 35 and state.usage["prefill_unknown"] == 0
    assert results["tasks"]["elitr_qa"]["accounting"]["tokens"]["prefilled"] == 35


def test_seconds_are_wall_time_not_the_sum_of_overlapping_requests(tiny_home: Path, tmp_path: Path) -> None:
    """Seven requests in flight together, each reporting 60 s of its own: the requests' own
    seconds add up to 7 x 60, the run's wall time is not their sum (nor one request's: none
    really took a second)."""
    _, _, state = run_engine(Unreported(slots=7, latency=60.0, together=7), "elitr_qa", tiny_home, tmp_path)
    usage = state.usage
    assert usage["requests"] == usage["generated"] == 7 and usage["peak_in_flight"] == 7  # the seven overlapped
    assert usage["request_seconds"] == 7 * 60.0
    assert usage["seconds"] < 60.0  # measured while they were in flight, not added up from their reports


def test_progress_advances_once_per_answer(tiny_home: Path, tmp_path: Path, monkeypatch) -> None:
    from tqdm import tqdm  # the progress bar's own class: every bar lceval shows is one

    updates: list[int] = []
    monkeypatch.setattr(tqdm, "update", lambda self, n=1: updates.append(n))
    run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert updates == [1] * 7  # every answer moves the bar, not every meeting
