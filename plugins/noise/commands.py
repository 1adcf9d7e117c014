"""`lceval noise ...`: transcript noise at a target WER (Thonet et al., 2024b, Sec. 3 and App. A).

- `corpus [TEXT...] [--elitr] -o CORPUS.jsonl`: a real aligned ASR corpus made here
  (espeak-ng speaks, pocketsphinx recognises; speech.py).
- `rules CORPUS -o RULES.json`: substitution rules from an aligned corpus (rules.py); CORPUS is
  a JSONL/TSV file or `hf:google/red_ace_asr_error_detection_and_correction` online.
- `apply RULES FILE --wer W`: one noisy text, with its effective WER (inject.py).
- `wer RULES`: Table 5 over the ELITR transcripts, no model (report.py).
- `report RUN...`: score against effective WER, Table 5 and drops from clean (report.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Command

PAPER_LEVELS = "0.2,0.4,0.6,0.8,1.0"


def _levels(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"expected comma-separated rates such as {PAPER_LEVELS}, got {text!r}",
                        field="--levels") from None
    if not values or any(not 0 <= v <= 1 for v in values):
        raise UserError(f"rates must lie in [0, 1] (0.2 = 20% WER), got {text!r}", field="--levels")
    return values


def _home(value: str | None) -> Path:
    from lceval.io import data_home

    return Path(value) if value else data_home()


def _elitr_transcripts(home: Path, splits: str) -> list[Path]:
    folder = home / "elitr-bench" / "transcripts"
    paths = sorted(p for split in splits.split(",") if split.strip()
                   for p in folder.glob(f"meeting_en_{split.strip()}_*.txt"))
    if not paths:
        raise UserError("no ELITR transcripts found", file=folder, field="--split",
                        hint="Run: lceval data fetch elitr-bench [--from DIR], or pass --data-home.")
    return paths


def _read_text(path: Path) -> str:
    from lceval.io import read_text

    if not path.is_file():
        raise UserError("file not found", file=path)
    return read_text(path, what="text file")


def _corpus(args: Any) -> str:
    from .speech import build_corpus, choose, split_sentences

    sentences = []
    for name in args.sources:
        text = "\n".join(l for l in _read_text(Path(name)).splitlines() if not l.lstrip().startswith("#"))
        sentences += split_sentences(text, Path(name).name)
    if args.elitr:
        for path in _elitr_transcripts(_home(args.data_home), args.split):
            sentences += split_sentences(_read_text(path), path.stem)
    if not args.sources and not args.elitr:
        raise UserError("give text files of sentences, or --elitr", field="SOURCE")
    voices = [v.strip() for v in args.voices.split(",") if v.strip()]
    chosen = choose(sentences, args.sentences, args.seed)

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done % 10 == 0 or done == total):
            print(f"recognised {done}/{total}", file=sys.stderr, flush=True)

    summary = build_corpus(chosen, Path(args.output), voices, args.speed, progress)
    return (f"wrote {summary['path']}: {summary['pairs']} pairs ({summary['recognised']} recognised now, the "
            f"rest resumed), {summary['tts']} -> {summary['asr']}")


def _rules(args: Any) -> str:
    from lceval_plugins.transcript_noise.corpus import read_corpus
    from lceval_plugins.transcript_noise.rules import build_rules, write_rules

    corpus = read_corpus(args.corpus)
    rules = build_rules(corpus)
    path = write_rules(rules, Path(args.output))
    c = rules["counts"]
    wer = "-" if rules["wer"] is None else f"{100 * rules['wer']:.1f}%"
    return (f"wrote {path}: {len(rules['rules'])} rules from {len(corpus.pairs)} pairs "
            f"({c['reference_words']} reference words; corpus WER {wer}: {c['substitutions']} substitutions, "
            f"{c['deletions']} deletions, {c['insertions']} insertions); corpus sha256 {corpus.sha256}")


def _apply(args: Any) -> str:
    from lceval_plugins.transcript_noise.inject import inject, measure
    from lceval_plugins.transcript_noise.rules import load_rules

    rules = load_rules(Path(args.rules))
    _levels(str(args.wer))
    text = _read_text(Path(args.file))
    result = inject(text, rules, args.wer, args.seed, protect=not args.no_protect, calibration=args.calibration)
    measured = measure(text, result.text)
    facts = {"target_wer": args.wer, "effective_wer": measured["wer"], "applied_rate": result.applied_rate,
             "words": result.words, "editable_words": result.editable, "applied": result.applied,
             "measured": measured, "seed": args.seed, "calibration": args.calibration,
             "rules_sha256": rules.sha256}
    if args.output:
        from lceval.io import write_text_atomic

        write_text_atomic(Path(args.output), result.text)
        return json.dumps(facts, indent=1)
    print(result.text, end="" if result.text.endswith("\n") else "\n")
    return json.dumps(facts)


def _wer(args: Any) -> str:
    from .report import table5_from_transcripts, table5_lines

    home = _home(args.data_home)
    paths = [Path(p) for p in args.files] if args.files else _elitr_transcripts(home, args.split)
    rows = table5_from_transcripts(paths, Path(args.rules), _levels(args.levels), args.seed,
                                   not args.no_protect, home, args.calibration)
    if args.format == "json":
        from dataclasses import asdict

        return json.dumps([asdict(r) for r in rows], indent=1)
    return "\n".join(table5_lines(rows, args.format == "markdown")) + "\n"


def _report(args: Any) -> str:
    from .report import format_report, noise_report

    return format_report(noise_report([Path(p) for p in args.run_dirs], n_boot=args.n_boot), args.format)


class NoiseCommand(Command):
    help = "transcript noise at a target WER: ASR corpus, substitution rules, noisy text, robustness report"

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="noise_command", required=True)
        c = sub.add_parser("corpus", help="speak sentences with espeak-ng and recognise them with pocketsphinx")
        c.add_argument("sources", nargs="*", metavar="SOURCE", help="text files (lines starting with # are skipped)")
        c.add_argument("--elitr", action="store_true", help="sentences of the ELITR transcripts in the data home")
        c.add_argument("--split", default="dev,test2", help="ELITR splits (with --elitr)")
        c.add_argument("--sentences", type=int, help="at most this many sentences, drawn with --seed (default all)")
        c.add_argument("--seed", type=int, default=0)
        c.add_argument("--voices", default="en-us,en-gb", help="espeak-ng voices, used in turn")
        c.add_argument("--speed", type=int, default=130,
                       help="espeak-ng words per minute (130: fewest errors of 120-160 on a sample)")
        c.add_argument("--data-home")
        c.add_argument("--quiet", action="store_true")
        c.add_argument("-o", "--output", required=True, help="the corpus (JSONL)")
        r = sub.add_parser("rules", help="substitution rules from an aligned corpus (Thonet et al., 2024b, App. A)")
        r.add_argument("corpus", help="JSONL or TSV of reference/hypothesis pairs, or hf:DATASET[:SPLITS]")
        r.add_argument("-o", "--output", required=True, help="the rules file (JSON)")
        a = sub.add_parser("apply", help="make one noisy text and print its effective WER")
        a.add_argument("rules")
        a.add_argument("file")
        a.add_argument("--wer", type=float, required=True, help="target rate, 0.2 = 20%%")
        a.add_argument("--seed", type=int, default=0)
        a.add_argument("--no-protect", action="store_true", help="let noise touch speaker tags and placeholders")
        a.add_argument("-o", "--output", help="write the noisy text here (default: print it)")
        a.add_argument("--calibration", choices=["simulator", "exact"], default="simulator")
        w = sub.add_parser("wer", help="target vs effective WER over transcripts, no model (Table 5)")
        w.add_argument("rules")
        w.add_argument("files", nargs="*", help="transcripts (default: the ELITR ones in the data home)")
        w.add_argument("--levels", default=PAPER_LEVELS)
        w.add_argument("--seed", type=int, default=0)
        w.add_argument("--split", default="dev,test2")
        w.add_argument("--no-protect", action="store_true")
        w.add_argument("--calibration", choices=["simulator", "exact"], default="simulator")
        w.add_argument("--data-home")
        w.add_argument("--format", choices=["text", "markdown", "json"], default="text")
        p = sub.add_parser("report", help="score against effective WER, Table 5, drop from clean")
        p.add_argument("run_dirs", nargs="+")
        p.add_argument("--n-boot", type=int, default=2000)
        p.add_argument("--format", choices=["text", "markdown", "json"], default="text")

    def run(self, args: Any) -> str:
        handlers = {"corpus": _corpus, "rules": _rules, "apply": _apply, "wer": _wer, "report": _report}
        return handlers[args.noise_command](args)
