"""`lceval summhay ...`: SummHay tools that are not a run.

- `lceval summhay synth --template OUT.json [...]`: write the deterministic template
  haystack (template.py); `lceval summhay synth OUT.json --model SPEC --topic TEXT [...]`:
  synthesis with a generator model (§3.2, synth.py), every call through the request cache.
- `lceval summhay retrieval-report HAYSTACK [--retrievers ...] [--budgets ...]`: the
  retrieval-only report (retrieval_report.py), markdown or JSON, no model.
- `lceval summhay from-hf OUT_DIR`: the published haystacks from the Hugging Face dataset
  Salesforce/summary-of-a-haystack as haystack JSON files (hf.py; needs `datasets`).
- `lceval summhay position RUN_DIR...`: mean Coverage / Citation / Joint of the three
  position-bias tasks found in the run directories and the §5.4 Position Sensitivity.
- `lceval summhay bias eval_benchmark_data.json`: Table 6 (App. A.3), each evaluator's bias by
  summarizer and the correlation of its scores with bullet length (bias.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Command
from lceval.io import quote, read_json_lines

from lceval.tokens import TOKENIZERS
from .haystack import DOMAINS
from .hf import HF_DATASET
from .scoring import position_sensitivity

ORDER_TASKS = {"random": "summhay_order_random", "top": "summhay_order_top", "bottom": "summhay_order_bottom"}


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"expected comma-separated integers, got {text!r}", field=flag) from None
    if not values or min(values) < 1:
        raise UserError(f"expected positive integers, got {text!r}", field=flag)
    return values


def _samples(run_dirs: list[Path]) -> list[dict[str, Any]]:
    out = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "samples.jsonl"
        if not path.is_file():
            raise UserError("not a run directory (no samples.jsonl)", file=run_dir)
        for n, record in read_json_lines(path, what="samples file"):
            if not isinstance(record, dict):
                raise UserError(f"a sample must be a JSON object, got {quote(record)}", file=path, line=n)
            out.append(record)
    return out


def position_table(run_dirs: list[Path], tasks: dict[str, str] = ORDER_TASKS) -> dict[str, Any]:
    """Per order: mean coverage, citation F1 (over summaries that have one) and joint of the
    judged samples; and the sensitivity max(|R - T|, |R - B|) on the joint (§5.4, Table 3)."""
    samples = _samples(run_dirs)
    rows: dict[str, dict[str, Any]] = {}
    for order, task in tasks.items():
        judged = [s["judgments"][0] for s in samples if s.get("task") == task and s.get("judgments")
                  and s["judgments"][0].get("parse_status") == "ok"]
        if not judged:
            raise UserError(f"no judged sample of task '{task}' in the run directories", field="RUN_DIR")
        details = [j.get("details") or {} for j in judged]
        cites = [d["citation_f1"] for d in details if d.get("citation_f1") is not None]
        rows[order] = {"task": task, "n": len(judged),
                       "joint": sum(j["score"] for j in judged) / len(judged),
                       "coverage": sum(d.get("coverage", 0.0) for d in details) / len(details),
                       "citation_f1": sum(cites) / len(cites) if cites else None}
    sensitivity = position_sensitivity({k: v["joint"] for k, v in rows.items()})
    return {"orders": rows, "position_sensitivity": sensitivity}


def _synth(args: Any) -> str:
    from .synth import SynthConfig, synthesize

    if not args.topic or not args.topic.strip():
        raise UserError("synthesis needs a topic", field="--topic",
                        hint='e.g. --topic "Three students prepare together for their statistics exam."')
    participants = [p.strip() for p in args.participants.split(",") if p.strip()]
    cfg = SynthConfig(topic=args.topic.strip(), domain=args.domain, participants=participants,
                      n_subtopics=args.subtopics, insights_per_subtopic=args.insights, n_documents=args.documents,
                      insights_per_document=args.insights_per_doc, words_per_document=args.words,
                      max_retries=args.max_retries, seed=args.seed)
    path, rec = synthesize(Path(args.out), cfg, args.model, cache_path=Path(args.cache) if args.cache else None)
    return (f"wrote {path}: {cfg.n_subtopics} subtopics, {cfg.n_documents} documents; "
            f"{rec['generated']} generated, {rec['cache_hits']} from the cache; "
            f"{rec['document_regenerations']} document regenerations, {rec['unverified_documents']} unverified")


def _all_evaluators(path: Path) -> list[str]:
    from .annotated import read_annotated_file
    from .bias import PREFIX

    return sorted({k[len(PREFIX):] for x in read_annotated_file(path) for k in x if k.startswith(PREFIX)})


class SummhayCommand(Command):
    help = "SummHay tools: template haystack, retrieval-only report, position sensitivity"

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="summhay_command", required=True)
        s = sub.add_parser("synth", help="write a haystack in the official schema")
        s.add_argument("out", help="output JSON file")
        s.add_argument("--template", action="store_true", help="deterministic template (no model)")
        s.add_argument("--model", help="generator model spec: synthesize with it (§3.2)")
        s.add_argument("--topic", help="the haystack's topic (with --model)")
        s.add_argument("--participants", default="Alice,Ben,Chloe",
                       help="comma-separated speakers of conversation documents")
        s.add_argument("--insights-per-doc", type=int, default=3, help="insights each document carries (--model)")
        s.add_argument("--words", type=int, default=750, help="words per document (--model; §3.2: 750)")
        s.add_argument("--max-retries", type=int, default=5, help="regenerations per step (--model; A.1.3: 5)")
        s.add_argument("--cache", help="request cache (default: lceval's, as `lceval run`)")
        s.add_argument("--subtopics", type=int, default=3)
        s.add_argument("--insights", type=int, default=3, help="insights per subtopic")
        s.add_argument("--documents", type=int, default=12)
        s.add_argument("--copies", type=int, default=3, help="documents holding each insight")
        s.add_argument("--filler", type=int, default=4, help="filler lines per document")
        s.add_argument("--domain", choices=list(DOMAINS), default="conversation")
        s.add_argument("--seed", type=int, default=0)
        r = sub.add_parser("retrieval-report", help="per retriever and budget, the insight sources kept (no model)")
        r.add_argument("haystack", help="a haystack JSON file or a folder of them")
        r.add_argument("--retrievers", default="random,keywords,bm25,embedding,oracle",
                       help="comma-separated retriever names or stored:NAME")
        r.add_argument("--budgets", default="15000", help="comma-separated token budgets")
        r.add_argument("--tokenizer", choices=list(TOKENIZERS), default="auto")
        r.add_argument("--seed", type=int, default=0)
        r.add_argument("--format", choices=["md", "json"], default="md")
        h = sub.add_parser("from-hf", help="write the Hugging Face dataset's haystacks as JSON files")
        h.add_argument("out_dir")
        h.add_argument("--dataset", default=HF_DATASET)
        h.add_argument("--split", default="train")
        h.add_argument("--revision", help="a commit of the dataset repository, for a pinned copy")
        b = sub.add_parser("bias", help="evaluator bias by summarizer and bullet length (App. A.3, Table 6)")
        b.add_argument("annotations", help="the authors' eval_benchmark_data.json")
        b.add_argument("--evaluators", help="comma-separated evaluators of the file, or 'all' "
                       "(default: Table 6's prompted_gpt-4o, prompted_claude3-opus, prompted_gemini-1.5-pro)")
        b.add_argument("--format", choices=["md", "json"], default="md")
        p = sub.add_parser("position", help="Position Sensitivity (§5.4) from runs of summhay_position")
        p.add_argument("run_dirs", nargs="+")
        p.add_argument("--format", choices=["md", "json"], default="md")

    def run(self, args: Any) -> str:
        if args.summhay_command == "synth":
            if args.template == bool(args.model):
                raise UserError("pass either --template or --model SPEC", field="--model",
                                hint="--template writes the deterministic demo haystack; --model synthesizes one.")
            if args.model:
                return _synth(args)
            from .template import write_template

            path = write_template(Path(args.out), n_subtopics=args.subtopics, insights_per_subtopic=args.insights,
                                  n_documents=args.documents, copies=args.copies, filler_lines=args.filler,
                                  seed=args.seed, domain=args.domain)
            return f"wrote {path}"
        if args.summhay_command == "retrieval-report":
            from .haystack import haystack_files
            from .retrieval_report import retrieval_report, to_markdown

            names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
            report = retrieval_report(haystack_files(Path(args.haystack)), names,
                                      _ints(args.budgets, "--budgets"), tokenizer=args.tokenizer, seed=args.seed)
            if args.format == "json":
                return json.dumps(report, indent=1)
            return to_markdown(report)
        if args.summhay_command == "from-hf":
            from .hf import export_hf

            paths = export_hf(Path(args.out_dir), args.dataset, args.split, args.revision)
            return (f"wrote {len(paths)} haystacks to {args.out_dir}; install them with "
                    f"`lceval data fetch summhay --from {args.out_dir}`")
        if args.summhay_command == "bias":
            from .bias import evaluator_bias, format_bias

            names = None
            if args.evaluators == "all":
                names = _all_evaluators(Path(args.annotations))
            elif args.evaluators:
                names = [n.strip() for n in args.evaluators.split(",") if n.strip()]
            return format_bias(evaluator_bias(Path(args.annotations), names), args.format)
        table = position_table([Path(p) for p in args.run_dirs])
        if args.format == "json":
            return json.dumps(table, indent=1)
        lines = ["| order | task | n | coverage | citation F1 | joint |", "|---|---|---:|---:|---:|---:|"]
        for order, row in table["orders"].items():
            cite = "-" if row["citation_f1"] is None else f"{row['citation_f1']:.1f}"
            lines.append(f"| {order} | {row['task']} | {row['n']} | {row['coverage']:.1f} | {cite} | {row['joint']:.1f} |")
        lines.append(f"\nPosition sensitivity (max |joint(random) - joint(top/bottom)|, §5.4): "
                     f"{table['position_sensitivity']:.1f}")
        return "\n".join(lines) + "\n"
