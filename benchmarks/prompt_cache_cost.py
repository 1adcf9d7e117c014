"""What a long-context run costs through each API provider with its prompt cache and without,
side by side, against local servers that speak the provider's wire format and bill as it
documents (tests/provider_servers.py, tests/provider_caches.py: Anthropic's cache breakpoints
at 1.25x for a write and 0.1x for a read, OpenAI's automatic cache at the model's cached-input
price, Gemini's implicit cache at 10%), at the list prices of Claude Sonnet 4.5, GPT-4.1 and
Gemini 2.5 Flash.

Two families with many questions per context:

- ELITR-Bench QA (`elitr_qa`) on the real data: 271 questions about 18 meeting transcripts;
- LooGLE's short-dependency QA (`loogle_shortdep_qa`, the shipped spec: its prompt, its cut)
  over rows in LooGLE's schema that this script writes: each real ELITR transcript as a
  document, its meeting's questions as the document's questions (LooGLE's own documents are on
  the Hub; the fixture in tests/data/loogle is too short to be cached).

For each provider and family, `lceval run` (in this process) with the cache (`prompt_cache=auto`,
the default) and without it (`prompt_cache=off`; OpenAI's and Gemini's caches are automatic, so
their servers serve nothing then: every prompt at the input price). It prints lceval's bill
(`usage.cost_usd`), the server's own bill (what the provider's arithmetic says) and whether they
agree, the prompt tokens read from and written into the cache, how many questions sent after
their context was cached read it (the scheduler interleaves contexts' questions), the dry run's
estimate ("at most", 3 characters a token, every answer at its full length), and the saving.

    python benchmarks/prompt_cache_cost.py [--data-home DIR] [--families elitr_qa,loogle_shortdep_qa]
        [--providers anthropic,openai,gemini] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the local provider servers live with the tests

from lceval.cli import main as lceval  # noqa: E402
from lceval.engine import load_catalog, load_plugins  # noqa: E402
from tests.provider_caches import CacheLedger  # noqa: E402
from tests.provider_servers import ProviderServer  # noqa: E402

#: provider -> (model spec, flags); Gemini 2.5 Flash thinks unless told not to
PROVIDERS = {
    "anthropic": ("litellm:anthropic/claude-sonnet-4-5,api_base={root}", ()),
    "openai": ("litellm:openai/gpt-4.1,api_base={url}", ()),
    "gemini": ("litellm:gemini/gemini-2.5-flash,api_base={root}", ("--thinking", "off")),
}


def call(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = lceval([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def data_home(given: str | None, folder: Path) -> Path:
    """A data home whose elitr-bench points at the real data (read, never copied)."""
    shared = Path(given or os.environ.get("LCEVAL_SHARED_DATASETS") or REPO.parent / "shared" / "datasets")
    if not (shared / "elitr-bench" / "data").is_dir():
        raise SystemExit(f"no ELITR-Bench data in {shared} (give --data-home: a folder holding elitr-bench/)")
    root = folder / "home" / "elitr-bench"
    root.mkdir(parents=True)
    for sub in ("data", "czech", "transcripts", "generated-responses", "minutes"):
        (root / sub).symlink_to(shared / "elitr-bench" / sub)
    return folder / "home"


def loogle_spec(home: Path, folder: Path) -> Path:
    """LooGLE's shipped shortdep_qa spec over rows in its schema: the ELITR transcripts as
    documents, each meeting's questions (dev and test2) as the document's question pairs."""
    rows = []
    for split in ("dev", "test2"):
        data = json.loads((home / "elitr-bench" / "data" / f"elitr-bench-qa_{split}.json").read_text())
        for meeting in data["meetings"]:
            text = (home / "elitr-bench" / "transcripts" / f"{meeting['id']}.txt").read_text(encoding="utf-8")
            pairs = [{"S": "", "Q": q["question"], "A": q["groundtruth-answer"]} for q in meeting["questions"]]
            rows.append({"input": text, "title": meeting["id"], "qa_pairs": repr(pairs), "output": "none"})
    data_file = folder / "loogle_rows.jsonl"
    data_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    spec = yaml.safe_load(load_catalog(load_plugins()).spec("loogle_shortdep_qa").path.read_text(encoding="utf-8"))
    spec["options"]["source"] = {"data_files": str(data_file), "split": "test"}
    path = folder / "loogle_shortdep_qa.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def one_run(server: ProviderServer, provider: str, task: str, home: Path, out: Path, cache: bool) -> dict[str, Any]:
    model, flags = PROVIDERS[provider]
    # Anthropic caches only what a request marks; the others' caches are automatic: off, they serve nothing
    server.ledger = CacheLedger(enabled=cache or provider == "anthropic")
    spec = model.format(url=server.url, root=server.root) + ("" if cache else ",prompt_cache=off")
    argv = ["run", "--tasks", task, "--model", spec, "--data-home", home, "--output", out, "--no-progress",
            "--cache", out / "requests.sqlite", *flags]
    code, dry, err = call(*argv, "--dry-run")
    if code != 0:
        raise SystemExit(err)
    estimate = float(re.search(r"\ntotal: \$([0-9.,]+)", dry).group(1).replace(",", ""))  # type: ignore[union-attr]
    start = time.perf_counter()
    code, shown, err = call(*argv)
    if code != 0:
        raise SystemExit(err)
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    usage = json.loads((run_dir / "manifest.json").read_text())["usage"]
    billed = round(server.ledger.total(), 8)  # type: ignore[union-attr]
    return {"requests": usage["generated"], "lceval_usd": usage["cost_usd"], "server_usd": billed,
            "dry_run_usd": estimate, "read": usage["cache_read_tokens"], "written": usage["cache_write_tokens"],
            "uncached": usage["uncached_prompt_tokens"], "reads_expected": usage["cache_reads_expected"],
            "reads_missed": usage["cache_reads_missed"],
            "seconds": round(time.perf_counter() - start, 1),
            "console": [line for line in shown.splitlines() if line.startswith(("cost:", "prompt cache"))]}


def said(family: str, provider: str, row: dict[str, Any]) -> str:
    """One line: both runs' bills (lceval's, the server's, the dry run's), the saving, the tokens."""
    on, off = row["cached"], row["uncached"]
    agree = all(abs(r["lceval_usd"] - r["server_usd"]) < 1e-6 for r in (on, off))
    return (f"{family:<19} {provider:<9} {on['requests']:>4} requests  cached ${on['lceval_usd']:.4f} (server "
            f"${on['server_usd']:.4f}; dry run at most ${on['dry_run_usd']:.4f})  uncached ${off['lceval_usd']:.4f} "
            f"(server ${off['server_usd']:.4f}; dry run ${off['dry_run_usd']:.4f})  saved "
            f"{1 - on['lceval_usd'] / off['lceval_usd']:.0%}  bills agree: {agree}  read {on['read']:,} written "
            f"{on['written']:,} uncached {on['uncached']:,} tokens; reads "
            f"{on['reads_expected'] - on['reads_missed']}/{on['reads_expected']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-home", help="a folder holding elitr-bench/ (default: ../shared/datasets)")
    parser.add_argument("--families", default="elitr_qa,loogle_shortdep_qa")
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        os.environ[name] = "local-server-key"  # the local servers take any key
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        home = data_home(args.data_home, folder)
        tasks = {"elitr_qa": "elitr_qa", "loogle_shortdep_qa": str(loogle_spec(home, folder))}
        server = ProviderServer()
        try:
            for family in args.families.split(","):
                for provider in args.providers.split(","):
                    row = {mode: one_run(server, provider, tasks[family], home,
                                         folder / f"{family}-{provider}-{mode}", mode == "cached")
                           for mode in ("cached", "uncached")}
                    results[f"{family} {provider}"] = row
                    print(said(family, provider, row), flush=True)
        finally:
            server.close()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
