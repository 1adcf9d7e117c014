"""`lceval verify BUNDLE`: is every number in a leaderboard bundle what its samples, its
data and its judge give?

A submitter controls every byte of a bundle, so no hash inside it proves anything by
itself. What does:

1. **Numbers**: each task's results are recomputed from its samples with the engine's own
   scoring (`scoring.score_task`, the code that wrote them) and compared number by number;
   each sample's `score` must be its judgment's.
2. **Items and data**: each task is loaded again, with the submitted resolved spec, from the
   verifier's own install of its dataset, which `lceval data fetch` checked against the
   archive checksums the dataset's plugin pins. Every item the task defines must be in the
   samples once per seed (no dropped or added sample), with the same question and reference,
   and every data file the run read must have the sha256 of the verifier's copy, itself
   unchanged since that pinned install.
3. **Judge**: a seeded sample of items is judged again with the declared judge when it runs
   offline (no model: `lexical`, `keyfacts-lexical`, `semantic`, `recorded` ...) and the
   scores and parse statuses compared.
4. **Answers**: when the model is a recorded one (a backend factory marked
   `interfaces.recomputable`, e.g. `replay:`), the same sample is asked again and answers,
   prompts (their hashes) and recorded extras compared.

Any difference is a problem: the bundle is rejected with the list (exit code 2).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval import __version__
from lceval.leaderboard._bundle import RUN_FILES, OpenBundle, data_entries, dataset_relpath, open_bundle
from lceval.io import sha256_bytes
from lceval.io import CHECKSUMS, dataset_path, read_record
from lceval.engine import Session
from lceval.errors import UserError
from lceval.interfaces import is_recomputable
from lceval.io import read_json_lines
from lceval.results import SAMPLES_MAX_BYTES, FinishedRun, load_run, score_task
from lceval.types import Sample

MAX_LISTED = 12  # differences listed per check before "... and N more"


@dataclass
class Verification:
    bundle: str
    name: str
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "name": self.name, "ok": self.ok, "passed": self.passed,
                "problems": self.problems, "notes": self.notes}


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def differences(reported: Any, recomputed: Any, where: str) -> tuple[list[str], int]:
    """Every leaf where the two JSON values differ, and how many leaves were compared."""
    if isinstance(reported, dict) and isinstance(recomputed, dict):
        out: list[str] = []
        n = 0
        for key in sorted(set(reported) | set(recomputed), key=str):
            if key not in recomputed:
                out.append(f"{where}.{key}: reported, but not in the recomputed results")
            elif key not in reported:
                out.append(f"{where}.{key}: recomputed, but missing from the reported results")
            else:
                sub, m = differences(reported[key], recomputed[key], f"{where}.{key}")
                out += sub
                n += m
        return out, n
    if isinstance(reported, list) and isinstance(recomputed, list) and len(reported) == len(recomputed):
        out, n = [], 0
        for i, (a, b) in enumerate(zip(reported, recomputed)):
            sub, m = differences(a, b, f"{where}[{i}]")
            out += sub
            n += m
        return out, n
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (reported, recomputed))
    same = _close(float(reported), float(recomputed)) if numbers else reported == recomputed
    return ([] if same else [f"{where}: reported {reported!r}, recomputed {recomputed!r}"]), 1


def _differ(what: list[str]) -> str:
    return " and ".join(what) + (" differs" if len(what) == 1 else " differ")


def _listed(items: list[str], prefix: str) -> list[str]:
    shown = [f"{prefix}{x}" for x in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        shown.append(f"{prefix}... and {len(items) - MAX_LISTED} more")
    return shown


class _RunCheck:
    """The checks of one run of a bundle; problems and passes are added to `out`."""

    def __init__(self, bundle: OpenBundle, entry: dict[str, Any], out: Verification, plugins: Any,
                 catalog: Any, home: Path, rejudge: int, seed: int, accept_unpinned: bool) -> None:
        self.bundle, self.entry, self.out = bundle, entry, out
        self.plugins, self.catalog, self.home = plugins, catalog, home
        self.rejudge, self.seed, self.accept_unpinned = rejudge, seed, accept_unpinned
        self.tag = f"run {entry['run_id']}"

    def problem(self, text: str) -> None:
        self.out.problems.append(f"{self.tag}: {text}")

    def problems(self, items: list[str], prefix: str) -> None:
        self.out.problems.extend(_listed(items, f"{self.tag}: {prefix}"))

    def passed(self, text: str) -> None:
        self.out.passed.append(f"{self.tag}: {text}")

    def run(self) -> None:
        folder = self.bundle.run_dir(self.entry["run_id"])
        changed = [f for f in RUN_FILES if not (folder / f).is_file()
                   or sha256_bytes((folder / f).read_bytes()) != (self.entry.get("files") or {}).get(f)]
        if changed:
            self.problem(f"{', '.join(changed)} differ from the sha256 listed in bundle.json (changed after packing)")
        try:
            run = load_run(folder)
        except UserError as exc:
            self.problem(f"unreadable: {exc.message}")
            return
        self.consistency(run)
        self.numbers(run)
        # the run reopened on this machine's verified data, with a cache of its own (an answer
        # asked again must come from the model, never from the verifier's earlier runs)
        with tempfile.TemporaryDirectory(prefix="lceval-verify-") as tmp, \
                Session.reopen(run, self.plugins, catalog=self.catalog, cache_path=Path(tmp) / "cache.sqlite",
                               data_home=self.home) as session:
            loaded = self.items_and_data(run, session)
            for task in run.results.get("tasks") or {}:
                picks = self.pick(run, task)
                self.judge_again(run, task, picks, session)
                if task in loaded:
                    self.answer_again(run, task, picks, loaded[task], session)

    def consistency(self, run: FinishedRun) -> None:
        resolved = run.record.model_spec or None
        if resolved is not None and resolved != run.model:
            self.problem(f"results.json says model {run.model!r}, the manifest {resolved!r}")
        if self.entry.get("model") != run.model:
            self.problem(f"bundle.json says model {self.entry.get('model')!r}, results.json {run.model!r}")
        if (self.entry.get("data") or []) != data_entries(run):
            self.problem("bundle.json's list of data files differs from the manifest's")
        tasks = self.entry.get("tasks") or {}
        for name, t in (run.results.get("tasks") or {}).items():
            if (tasks.get(name) or {}).get("judge") != t.get("judge"):
                self.problem(f"{name}: bundle.json's judge identity differs from results.json's")
        # the recorded `score` field itself (a Sample derives its score from the judgments)
        records = read_json_lines(self.bundle.run_dir(run.run_id) / "samples.jsonl", what="samples file",
                                  limit=SAMPLES_MAX_BYTES)
        bad = []
        for n, rec in records:
            judged = (rec.get("judgments") or [{}])[0].get("score") if rec.get("judgments") else None
            if rec.get("score") != judged:
                bad.append(f"line {n} ({rec.get('item_id')}): score {rec.get('score')!r} but its judgment says {judged!r}")
        self.problems(bad, "samples.jsonl ")

    def numbers(self, run: FinishedRun) -> None:
        tasks = run.results.get("tasks") or {}
        seeds = run.record.seeds
        in_samples = {s.task for s in run.samples}
        for name in sorted(in_samples - set(tasks)):
            self.problem(f"samples of task {name!r}, which results.json does not report")
        for name, reported in tasks.items():
            try:
                spec = run.spec(name)
            except UserError as exc:
                self.problem(exc.message)
                continue
            recomputed = score_task(run.task_samples(name), spec, reported.get("judge") or {}, seed=seeds[0],
                                    metric_identities=reported.get("metric_judges"))
            diffs, n = differences(reported, recomputed, f"results {name}")
            if diffs:
                self.problems(diffs, "")
            else:
                self.passed(f"{name}: {n} reported values recomputed from {len(run.task_samples(name))} samples")

    def items_and_data(self, run: FinishedRun, session: Session) -> dict[str, list[Any]]:
        """Load every task from this machine's verified data; compare items and data files.
        Returns the conversations of each task that loaded (for answering again)."""
        loaded: dict[str, list[Any]] = {}
        datasets: set[str] = set()
        read: dict[str, str] = {}
        for name in run.results.get("tasks") or {}:
            spec = run.spec(name)
            dataset = spec.dataset
            if dataset:
                datasets.add(dataset)
                if not self.pinned(dataset):
                    continue
            read_from: list[dict[str, Any]] = []
            try:
                conversations = session.load(spec, sources=read_from, files=read)
            except UserError as exc:
                self.problem(f"{name}: cannot load the task from this machine's data: {exc.render()}")
                continue
            loaded[name] = conversations
            self.items(run, name, conversations)
            self.revisions(run, name, read_from)
        mine = {dataset_relpath(p, datasets): h for p, h in read.items()}
        theirs = {(e["dataset"], e["path"]): e["sha256"] for e in data_entries(run)}
        if loaded and len(loaded) == len(run.results.get("tasks") or {}):
            diffs = [f"{d or '(no dataset)'}/{p}: submitted {theirs.get((d, p), 'not read')[:12]}, "
                     f"verified copy {mine.get((d, p), 'not read')[:12]}"
                     for d, p in sorted(set(mine) | set(theirs), key=str) if mine.get((d, p)) != theirs.get((d, p))]
            if diffs:
                self.problems(diffs, "other data: ")
            else:
                self.passed(f"data: {len(theirs)} files have the sha256 of the verified install "
                            f"({', '.join(sorted(datasets))})")
        self.intact(mine)
        return loaded

    def revisions(self, run: FinishedRun, task: str, fresh: list[dict[str, Any]]) -> None:
        """Every dataset revision the run recorded (manifest `data_sources`, e.g. a Hugging Face
        dataset's resolved commit) is the one this machine read when it loaded the task again:
        a branch that moved, or a manifest edited after the run, is a problem."""
        recorded = [s for s in (run.record.data_sources.get(task) or [])
                    if isinstance(s, dict) and s.get("revision")]
        if not recorded:
            return

        def key(source: dict[str, Any]) -> str:
            return json.dumps([source.get(k) for k in ("dataset", "name", "split", "data_files")], sort_keys=True,
                              default=str)

        mine = {key(s): s.get("revision") for s in fresh if isinstance(s, dict)}
        diffs = []
        for source in recorded:
            what = f"{source.get('dataset') or '(dataset)'} {source.get('data_files') or source.get('name') or ''}".strip()
            got = mine.get(key(source))
            if got is None:
                diffs.append(f"{what}: the run recorded revision {source['revision']}, but loading the task here "
                             "read no such source")
            elif got != source["revision"]:
                diffs.append(f"{what}: the run recorded revision {source['revision']}, this machine read {got}")
        if diffs:
            self.problems(diffs, f"{task}: data source ")
        else:
            self.passed(f"{task}: {len(recorded)} dataset revision(s) as the run recorded them "
                        f"({', '.join(sorted({str(s['revision'])[:12] for s in recorded}))})")

    def pinned(self, dataset: str) -> bool:
        """The local install of `dataset` exists and was made from the archives its plugin pins."""
        ds = self.plugins.datasets.get(dataset)
        if ds is None:
            self.problem(f"no installed plugin provides dataset {dataset!r}")
            return False
        try:
            record = read_record(dataset_path(dataset, self.home)) or {}
        except UserError as exc:
            self.problem(f"cannot check the data: {exc.render()}")
            return False
        if ds.files:
            pinned = {f.name: f.sha256 for f in ds.files}
            if record.get("archives") != pinned:
                self.problem(f"this machine's {dataset} was not installed from the archives its plugin pins")
                return False
        elif not self.accept_unpinned:
            self.problem(f"dataset {dataset!r} publishes no checksums, so its files cannot be verified "
                         "(--accept-unpinned compares them with this machine's copy)")
            return False
        else:
            self.out.notes.append(f"{self.tag}: {dataset} has no pinned checksums; compared with this machine's copy")
        return True

    def intact(self, mine: dict[tuple[str | None, str], str]) -> None:
        """The verifier's files read are those its pinned install wrote (unmodified since)."""
        records: dict[str, dict[str, Any]] = {}
        changed = []
        for (dataset, rel), digest in mine.items():
            if dataset is None:
                continue
            if dataset not in records:
                records[dataset] = read_record(self.home / dataset) or {}
            if (records[dataset].get("files") or {}).get(rel) != digest:
                changed.append(f"{dataset}/{rel}")
        if changed:
            self.problems(changed, f"this machine's data changed since it was fetched (see {CHECKSUMS}): ")

    def items(self, run: FinishedRun, task: str, conversations: list[Any]) -> None:
        turns = {t.item_id: t for c in conversations for t in c.turns}
        seeds = run.record.seeds
        have: dict[tuple[str, int], list[Sample]] = {}
        for s in run.task_samples(task):
            have.setdefault((s.item_id, s.seed), []).append(s)
        want = {(i, seed) for i in turns for seed in seeds}
        dropped = sorted(want - set(have), key=str)
        extra = sorted(set(have) - want, key=str)
        twice = sorted(k for k, v in have.items() if len(v) > 1)
        text = []
        for item, seed in sorted(want & set(have), key=str):
            s, t = have[(item, seed)][0], turns[item]
            fields = [n for n, a, b in (("question", s.question, t.question), ("reference", s.reference, t.reference))
                      if a != b]
            if fields:
                text.append(f"{item} (seed {seed}): {_differ(fields)} from the data")
        self.problems([f"{i} (seed {s})" for i, s in dropped], f"{task}: sample missing (dropped?): ")
        self.problems([f"{i} (seed {s})" for i, s in extra], f"{task}: sample not in the task: ")
        self.problems([f"{i} (seed {s})" for i, s in twice], f"{task}: sample given twice: ")
        self.problems(text, f"{task}: ")
        if not (dropped or extra or twice or text):
            self.passed(f"{task}: all {len(want)} items of the task (× seeds) present once, questions and "
                        "references as in the data")

    @staticmethod
    def answered(run: FinishedRun, task: str) -> int:
        return sum(1 for s in run.task_samples(task) if s.response is not None)

    def pick(self, run: FinishedRun, task: str) -> list[Sample]:
        """A seeded sample of answered items (the same for the same bundle and --seed)."""
        answered = [s for s in run.task_samples(task) if s.response is not None]
        rng = random.Random(f"{self.seed}:{run.run_id}:{task}")
        chosen = sorted(rng.sample(range(len(answered)), min(self.rejudge, len(answered))))
        return [answered[i] for i in chosen]

    def judge_again(self, run: FinishedRun, task: str, picks: list[Sample], session: Session) -> None:
        if not picks:
            return
        spec = run.spec(task)
        try:
            judge = session.judge_of(spec, picks[0].seed, with_model=False)
        except UserError as exc:
            self.out.notes.append(f"{self.tag}: {task}: not re-judged: {exc.message}")
            return
        if judge.uses_model:
            self.out.notes.append(f"{self.tag}: {task}: not re-judged: judge {judge.name!r} calls a model "
                                  "(its raw outputs are in the samples)")
            return
        declared = (run.results.get("tasks") or {}).get(task, {}).get("judge")
        if judge.identity() != declared:
            self.problem(f"{task}: the declared judge is {declared!r}, this lceval's is {judge.identity()!r}")
            return
        fresh, _ = session.judge(picks, spec, with_model=False)
        diffs = []
        for old, new in zip(picks, fresh):
            a = old.judgments[0] if old.judgments else None
            b = new.judgments[0] if new.judgments else None
            same = (a is not None and b is not None and a.parse_status == b.parse_status
                    and (a.score == b.score or (a.score is not None and b.score is not None and _close(a.score, b.score))))
            if not same:
                diffs.append(f"{old.item_id} (seed {old.seed}): recorded {a.score if a else None!r} "
                             f"({a.parse_status if a else 'no judgment'}), re-judged {b.score if b else None!r} "
                             f"({b.parse_status if b else 'no judgment'})")
        if diffs:
            self.problems(diffs, f"{task}: judged again with {judge.name}: ")
        else:
            self.passed(f"{task}: {len(picks)} of {self.answered(run, task)} answered items (seeded sample) judged "
                        f"again with {judge.name}: same scores and parse statuses")

    def answer_again(self, run: FinishedRun, task: str, picks: list[Sample], conversations: list[Any],
                     session: Session) -> None:
        try:
            mspec = session.model_spec()
        except UserError:
            return
        if not is_recomputable(mspec.factory) or not picks:
            return
        wanted = {s.item_id for s in picks}
        convs = [c for c in conversations if any(t.item_id in wanted for t in c.turns)]
        spec = run.spec(task)
        by_key = {(s.item_id, s.seed): s for s in run.task_samples(task)}
        diffs: list[str] = []
        for seed in sorted({s.seed for s in picks}):
            for fresh in session.answer_again(spec, convs, seed):
                old = by_key.get((fresh.item_id, seed))
                if fresh.item_id not in wanted or old is None:
                    continue
                what = []
                if fresh.response is None or fresh.response != old.response:
                    what.append("answer")
                if fresh.prompt_hash != old.prompt_hash:
                    what.append("prompt")
                if fresh.response is not None and fresh.generation_extras != old.generation_extras:
                    what.append("recorded extras")
                if what:
                    diffs.append(f"{fresh.item_id} (seed {seed}): {_differ(what)} from what {mspec.scheme}: gives")
        if diffs:
            self.problems(diffs, f"{task}: asked again: ")
        else:
            self.passed(f"{task}: {len(picks)} of {self.answered(run, task)} answered items (seeded sample) asked "
                        f"again of {mspec.scheme}: same answers, prompts and recorded extras")


def verify_bundle(path: Path, plugins: Any, catalog: Any, home: Path, *, rejudge: int = 200, seed: int = 0,
                  accept_unpinned: bool = False) -> Verification:
    if rejudge < 0:
        raise UserError(f"--rejudge must be 0 or more, got {rejudge}", field="--rejudge")
    with open_bundle(Path(path)) as bundle:
        out = Verification(bundle=str(path), name=str(bundle.index.get("name", "")))
        if bundle.index.get("lceval_version") != __version__:
            out.notes.append(f"packed by lceval {bundle.index.get('lceval_version')}, verified with {__version__}: "
                             "a difference may come from a change of lceval")
        theirs = bundle.index.get("plugins") or {}
        mine = {i.name: i.version for i in plugins.infos if not i.disabled and not i.error}
        changed = sorted(n for n, v in theirs.items() if mine.get(n) != (v or {}).get("version"))
        if changed:
            out.notes.append("plugin versions differ from this machine's: " + ", ".join(
                f"{n} {(theirs[n] or {}).get('version')} vs {mine.get(n, 'absent')}" for n in changed))
        listed = {r["run_id"] for r in bundle.index["runs"]}
        present = {p.name for p in (bundle.root / "runs").iterdir()} if (bundle.root / "runs").is_dir() else set()
        for extra in sorted(present - listed):
            out.problems.append(f"run {extra}: in the bundle but not listed in bundle.json")
        for entry in bundle.index["runs"]:
            _RunCheck(bundle, entry, out, plugins, catalog, home, rejudge, seed, accept_unpinned).run()
    return out


def format_verification(v: Verification) -> str:
    lines = [f"bundle {v.bundle}" + (f" ({v.name})" if v.name else "")]
    lines += [f"  ok    {p}" for p in v.passed]
    lines += [f"  note  {n}" for n in v.notes]
    if v.ok:
        lines.append(f"VERIFIED: {len(v.passed)} checks passed")
    else:
        lines.append(f"REJECTED: {len(v.problems)} problem(s)")
        lines += [f"  - {p}" for p in v.problems]
    return "\n".join(lines)
