"""Writers for a run directory: results.json, samples.jsonl, manifest.json, and the console
table. A run directory appears only when complete (written aside, then renamed), so a crash
never leaves partial results where good ones were expected. A run a cost limit stopped is
written as what it is: its folder named `..._partial`, `partial` in results.json and the
manifest saying which limit stopped it and what was not sent."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jsonschema

from lceval import __version__
from lceval.errors import UserError
from lceval.io import atomic_directory, check_writable, replaced_directory, text_table
from lceval.engine import FinishedRun, Plugins, RunRecord, RunState, Session, model_label, tokens_label
from lceval.results._cost import cost_summary, format_cost, format_prompt_cache
from lceval.results._bins import length_bins
from lceval.results._curves import length_curves
from lceval.results._scoring import DIFFERS_MARK, UNCENSORED, differs_from_paper, headline_block, score_task
from lceval.io import load_schema
from lceval.methods import METHOD_OPTION, RATIO_OPTION
from lceval.options import split_options

RESULTS_SCHEMA_VERSION = 1


def run_id_for(state: RunState) -> str:
    """`<time>_<model>[_<press>-<ratio>]_<task>`: the model as a table names it (`GPT-4` for a
    replay of ELITR's recorded file, `smollm2` for the alias), the long-context method and its
    ratio where the model names one (a `--press-sweep`'s folders differ by them, not only by
    the time) and the first task (`+N` more), readable in `ls`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    bases = list(dict.fromkeys(t.spec.name.split("@")[0] for t in state.tasks))
    task = (bases[0] + (f"+{len(bases) - 1}" if len(bases) > 1 else "")) if bases else "none"
    model = model_label(state.model_text)
    options = split_options(state.model_text.strip())[1]
    if METHOD_OPTION in options:
        model += f"_{options[METHOD_OPTION]}-{options.get(RATIO_OPTION, 'default')}"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{model[:48]}_{task}").strip("-.")
    return f"{stamp}_{name[:80]}" + ("_partial" if state.stopped else "")


def build_results(state: RunState, run_id: str) -> dict[str, Any]:
    results = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "lceval_version": __version__,
        "run_id": run_id,
        "model": state.model_spec.canonical,
        "seeds": list(state.config.seeds),
        "tasks": {},
    }
    for task in state.tasks:
        results["tasks"][task.spec.name] = score_task(task.samples, task.spec, task.judge_identity,
                                                      seed=state.config.seeds[0],
                                                      metric_identities=task.metric_identities)
    if state.stopped:  # a cost limit stopped it: these are not the run's full results
        results["partial"] = {"reason": "cost_limit", **state.stopped}
    samples = {t.spec.name: t.samples for t in state.tasks}
    specs = {t.spec.name: t.spec for t in state.tasks}
    threshold = state.config.effective_threshold
    curves = length_curves(results["tasks"], samples, specs, seed=state.config.seeds[0], threshold=threshold)
    if curves:  # a --context-lengths sweep
        results["length_curves"] = curves
    bins = length_bins(samples, specs, seed=state.config.seeds[0], threshold=threshold)
    if bins:  # specs that say where each sample falls on the length axis
        results["length_bins"] = bins
    if state.skipped_lengths:  # lengths of the sweep past the model's window: not run, said so
        results["skipped_lengths"] = [dict(entry) for entry in state.skipped_lengths]
    jsonschema.validate(results, load_schema("results.schema.json"))
    return results


def _git_commit() -> dict[str, Any] | None:
    """The commit of the lceval source tree this run used (editable installs), if any."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def provenance(plugins: Plugins) -> dict[str, Any]:
    """The record's fields that say where and when a run was written: the versions of lceval,
    Python, the platform, the plugins and libraries, every name two plugins (or a plugin and
    the task catalog) gave with who won and why, the source commit, the time."""
    return {
        "versions": {
            "lceval": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "plugins": {i.name: {"distribution": i.distribution, "version": i.version,
                                 "disabled": i.disabled, "error": i.error, "overriding": i.overriding}
                        for i in plugins.infos},
            "libraries": library_versions(),
        },
        "plugin_clashes": [c.as_dict() for c in plugins.clashes],
        "git_commit": _git_commit(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def library_versions() -> dict[str, str]:
    """The versions of the libraries lceval depends on (its own and its extras': torch,
    transformers, vllm, llama-cpp-python, litellm, sentence-transformers ...) that this process
    imported: the engines that produced or judged the answers, so a number can be traced to
    them."""
    from importlib import metadata

    wanted = set()
    for requirement in metadata.requires("lceval") or []:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if match:
            wanted.add(re.sub(r"[-_.]+", "-", match.group(0)).lower())
    tops = {name.split(".")[0] for name in list(sys.modules)}
    out: dict[str, str] = {}
    for top, dists in metadata.packages_distributions().items():
        if top not in tops:
            continue
        for dist in dists:
            if re.sub(r"[-_.]+", "-", dist).lower() in wanted:
                try:
                    out[dist] = metadata.version(dist)
                except metadata.PackageNotFoundError:
                    pass
    return dict(sorted(out.items()))


def sample_record(sample: Any) -> dict[str, Any]:
    rec = asdict(sample)
    rec["score"] = rec["judgments"][0]["score"] if rec["judgments"] else None
    if rec.get("reasoning") is None:  # a model that does not think: the lines lceval always wrote
        rec.pop("reasoning", None)
        rec.pop("reasoning_tokens", None)
    if rec.get("raw_response") is None:  # as written = as stripped
        rec.pop("raw_response", None)
    for name in ("cache_read_tokens", "cache_write_tokens"):  # only where a provider reported its prompt cache
        if rec.get(name) is None:
            rec.pop(name, None)
    if rec["context_cut"].get("head_tokens") is None:  # a cut in the context's middle
        rec["context_cut"].pop("head_tokens", None)
    return rec




def served_from_cache(state: RunState) -> bool:
    """Nothing was generated or judged anew: every answer and verdict came from the cache."""
    judged = (state.judge_usage or {}).get("generated", 0)
    return (state.usage.get("generated") == 0 and not judged and state.source_run is None
            and state.merged_from is None and any(t.samples for t in state.tasks))


def repeated_run(output: Path, wanted: dict[str, Any]) -> Path | None:
    """The newest finished run folder in `output` whose record says it is the run `wanted`
    describes (`RunRecord.same_run`), or None."""
    if not output.is_dir():
        return None
    found: list[tuple[str, Path]] = []
    for folder in output.iterdir():
        if folder.name.startswith(".") or not (folder / "results.json").is_file():
            continue
        try:
            old = RunRecord.read(folder)
        except UserError:  # not a run this lceval can read: never the one repeated
            continue
        if old.same_run() == wanted:
            found.append((old.finished_at, folder))
    return max(found)[1] if found else None


def write_run(state: RunState, plugins: Plugins, output: Path) -> tuple[Path, dict[str, Any]]:
    """The run folder of `state` in `output`. A rerun served wholly from the cache replaces
    the folder of the run it repeats (same settings, model and tasks), under its name, so the
    same command run twice leaves one folder (`lceval report runs/*/` shows the model once);
    any other run gets a new folder."""
    previous = repeated_run(Path(output), RunRecord.of(state).same_run()) if served_from_cache(state) else None
    with atomic_directory(output, run_id_for(state), replace=previous) as (tmp, final):
        run_id = final.name
        results = build_results(state, run_id)
        record = RunRecord.of(state, run_id, cost=cost_summary(state.usage, state.judge_usage), **provenance(plugins))
        if previous is not None:
            record.replaced = {"run_id": previous.name, "why": "the same run again, every answer from the cache"}
        _write_files(tmp, state, results, record)
    return final, results


def rewrite_run(state: RunState, run: FinishedRun) -> tuple[Path, dict[str, Any]]:
    """`run`'s folder in place with `state`: the same run (its id, its record of how it was
    made), more judgments. Its new metrics are recorded in the manifest (the resolved specs,
    and `metrics_added`: what was added, when, by which command)."""
    results = build_results(state, run.run_id)
    added = [{"task": t.spec.name, "metrics": t.metric_identities} for t in state.tasks]
    record = replace(run.record, tasks={t.spec.name: t.spec for t in state.tasks},
                     metrics_added=[*run.record.metrics_added,
                                    {"command": state.config.command, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                     "tasks": added, "judge_usage": state.judge_usage}])
    with replaced_directory(run.path) as tmp:
        _write_files(tmp, state, results, record)
    return run.path, results


def _write_files(folder: Path, state: RunState, results: dict[str, Any], record: RunRecord) -> None:
    with open(folder / "samples.jsonl", "w", encoding="utf-8") as fh:
        for task in state.tasks:
            for sample in task.samples:
                fh.write(json.dumps(sample_record(sample), ensure_ascii=False) + "\n")
    (folder / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    (folder / "manifest.json").write_text(json.dumps(record.to_manifest(), indent=2, ensure_ascii=False) + "\n")


def run_and_write(session: Session, output: Path | None = None) -> list[tuple[Path, dict[str, Any], RunState]]:
    """`lceval run`: each model of the session's plan answered (the engine), scored and
    written (here); per model its run folder, results and state. The output folder is probed
    before any model loads: hours of generation must not end in "cannot write". A cost limit
    that stops a model's run leaves the next models unstarted."""
    plan = session.plan()
    target = Path(output or plan.config.output)
    check_writable(target)
    done = []
    for model in plan.models:
        state = session.answer(model)
        run_dir, results = write_run(state, session.plugins, target)
        done.append((run_dir, results, state))
        if state.stopped:
            break
    return done


def format_context_facts(state: RunState) -> str:
    """Per task, the mean over its contexts of each number a task type recorded per context
    (`TaskContext.record_facts`), one level deep: e.g. the noise level and effective WER of the
    transcripts. Empty when no task recorded any."""
    lines = []
    for task in state.tasks:
        sums: dict[str, list[float]] = {}
        for facts in task.context_facts.values():
            for group, values in facts.items():
                items = values.items() if isinstance(values, dict) else [("", values)]
                for key, value in items:
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        sums.setdefault(f"{group}.{key}" if key else group, []).append(float(value))
        if sums:
            n = len(task.context_facts)
            shown = ", ".join(f"{k}={sum(v) / len(v):.4g}" for k, v in sums.items())
            lines.append(f"{task.spec.name} (mean over {n} context{'s' if n != 1 else ''}): {shown}")
    return "\n".join(lines)


def console_text(state: RunState, results: dict[str, Any]) -> str:
    """What `lceval run` and `lceval score` print for a run: the table, then the context
    facts and, for a model that thought, its thinking."""
    facts = format_context_facts(state)
    thinking = "\n".join([*state.reasoning_used, format_thinking(results)]).strip()
    cost = "\n".join(t for t in (format_cost(cost_summary(state.usage, state.judge_usage)),
                                   format_prompt_cache(state.usage, state.judge_usage)) if t)
    partial = ("PARTIAL: a cost limit stopped the run (" + str(state.stopped["limit"]) + "); the scores are of the "
               "answers it got" if state.stopped else "")
    skipped = "\n".join(f"{e['task']}: not run, {e['length']:,} tokens is past the model's window of "
                        f"{e['window']:,}"
                        for e in results.get("skipped_lengths") or [])
    return (format_table(results) + (f"\n\n{skipped}" if skipped else "") + (f"\n\n{facts}" if facts else "")
            + (f"\n\n{thinking}" if thinking else "")
            + (f"\n\n{cost}" if cost else "") + (f"\n{partial}" if partial else ""))


def format_thinking(results: dict[str, Any]) -> str:
    """One line per task whose model thought: tokens thought (of the completion tokens, as
    providers bill them) and per thinking answer, the same numbers results.json holds (unknown
    where the API reported them for none or only some answers), and the censored answers."""
    lines = []
    for name, task in results["tasks"].items():
        acc = task["accounting"]
        tokens = acc.get("tokens") or {}
        if "reasoning" not in tokens and not acc.get("unclosed_thinking"):
            continue
        thought = int(tokens.get("thinking_answers") or acc.get("answered") or 0)
        reasoning = tokens.get("reasoning")
        if reasoning is None:
            line = (f"{name}: thinking tokens not reported for {tokens.get('reasoning_unknown', 0)} of {thought} "
                    f"answer(s) (inside their {tokens.get('completion', 0):,} completion tokens)")
        else:
            line = (f"{name}: thinking {reasoning:,} tokens of {tokens.get('completion', 0):,} completion tokens "
                    f"({reasoning / max(1, thought):,.0f} per thinking answer)")
        if acc.get("censored"):
            line += (f"; {acc['censored']} censored (the thinking was cut before any answer: "
                     f"{acc['censored_share']:.0%} of the items, at the bottom of the judge's scale in the score)")
        elif acc.get("unclosed_thinking"):
            line += f"; {acc['unclosed_thinking']} answer(s) never closed their thinking (no answer)"
        lines.append(line)
    return "\n".join(lines)


def _fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(results: dict[str, Any], markdown: bool = False) -> str:
    """One line per task and group: mean, 95% CI, n, and what was cut or failed; then, for a
    `--context-lengths` sweep, the score at each length and the effective length. A task whose
    spec says its number is not comparable with the paper's is marked, and why said under it."""
    table = _render(table_rows(results), markdown)
    curves = results.get("length_curves")
    bins = results.get("length_bins")
    differs = differs_from_paper(results["tasks"])
    notes = "".join(f"\n{DIFFERS_MARK} {name}: not comparable with the paper's number: {why}"
                    for name, why in differs.items())
    return (table + ("\n\n" + _render(curve_rows(curves), markdown) if curves else "")
            + ("\n\n" + _render(bin_rows(bins), markdown) if bins else "")
            + ("\n" + notes if notes else ""))


def curve_rows(curves: dict[str, Any]) -> list[tuple[str, ...]]:
    """A row per swept task (and their mean): the score at each length, the effective length."""
    labels: list[str] = []
    for curve in curves.values():
        for point in curve["points"]:
            if point["label"] not in labels:
                labels.append(point["label"])
    rows = [("task", *labels, "effective length")]
    for name, curve in curves.items():
        at = {p["label"]: p["value"] for p in curve["points"]}
        rows.append((name if name != "mean" else "mean of tasks", *(_fmt(at.get(lab)) for lab in labels),
                     effective_said(curve)))
    return rows


def effective_said(curve: dict[str, Any]) -> str:
    """A curve's effective length in words: "32k (>= 85.6)", "none (< 85.6 at the shortest)",
    "n/a: no threshold"."""
    eff, threshold = curve.get("effective_length"), curve.get("threshold")
    if threshold is None:
        return "n/a: no threshold"
    return f"{_tokens(eff)} (>= {threshold:g})" if eff is not None else f"none (< {threshold:g} at the shortest)"


def bin_rows(bins: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per curve of `length_bins`: a row per bin (its length, score, 95% interval, n), then its
    effective length, and the samples in no bin when there were any."""
    rows = [("length bins", "bin", "length", "score", "95% CI", "n")]
    for name, curve in bins.items():
        for p in curve["points"]:
            rows.append((name, p["label"], _tokens(p["length"]), _fmt(p["value"]), _point_ci(p), str(p["n"])))
        rows.append((name, "effective length", effective_said(curve), "", "", ""))
        if curve.get("uncounted"):
            rows.append((name, "not counted", "", "", "n/a: the model lends no tokenizer", str(curve["uncounted"])))
        elif curve.get("unbinned"):
            rows.append((name, "in no bin", "", "", "", str(curve["unbinned"])))
    return rows


def _point_ci(point: dict[str, Any]) -> str:
    ci = point.get("ci")
    if ci:
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    return "n/a: no score" if not point.get("n") else "n/a"


def _tokens(n: int) -> str:
    return tokens_label(int(n))


def _render(rows: list[tuple[str, ...]], markdown: bool) -> str:
    return "\n".join(text_table(rows, markdown=markdown))


def table_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """A row per group, the task's mean, tests and further metrics. An empty interval or
    p-value says in its own cell why there is none (one meeting, too few scores), so a short
    run's table is never silently blank."""
    censoring = any((t.get("accounting") or {}).get("censored") for t in results["tasks"].values())
    head: tuple[str, ...] = ("task", "group", "score", "95% CI", "n", "trunc", "skip", "no-score")
    rows = [head + (("censored",) if censoring else ())]
    pad = ("",) if censoring else ()
    for name, task in results["tasks"].items():
        name += DIFFERS_MARK if task.get("differs_from_paper") else ""
        metric = task["metrics"]["score"]
        acc = task["accounting"]
        unit = _unit(task.get("cluster_by"))
        groups = metric.get("groups") or {}
        for gname, g in groups.items():
            rows.append((name, gname, _fmt(g["value"]), _ci(g, unit), str(g["n"]), "", "", "") + pad)
        label = "mean of groups" if groups else "all"
        headline = headline_block(metric)
        censored = int(acc.get("censored") or 0)
        # a censored answer is in the score (at the bottom of the scale), not among the no-scores
        no_score = acc["judge_parse_failures"] + acc.get("judge_missing", 0) + acc.get("unanswered", 0) - censored
        rows.append((name, label, _fmt(headline["value"]), _ci(headline, unit), str(metric["n"]),
                     f"{acc['truncated_share']:.0%}", f"{acc['skipped_share']:.0%}", str(no_score))
                    + ((f"{acc.get('censored_share', 0.0):.0%}",) if censoring else ()))
        seeds = metric.get("across_seeds")
        if seeds and seeds.get("mean") is not None:
            rows.append((name, f"{seeds['n_seeds']} seeds", f"{_fmt(seeds['mean'])} ± {_fmt(seeds['std'])}",
                         "", "", "", "", "") + pad)
        # per group, as the papers test (Thonet et al., 2024a, Table 9 is test2 alone); pooled only without groups
        tested = [(f"{gname} {tname}", t) for gname, g in groups.items() for tname, t in (g.get("tests") or {}).items()]
        for label, t in tested or list((metric.get("tests") or {}).items()):
            why = "" if t["p_value"] is not None else f"n/a: {t.get('note') or 'no test'}"
            rows.append((name, label, f"p={_fmt(t['p_value'], 3)}", why, f"{t['n_a']}/{t['n_b']}", "", "", "") + pad)
        for mname, extra in task["metrics"].items():
            if mname == "score":
                continue
            value = extra.get("mean_of_groups") if extra.get("groups") else extra["value"]
            shown = UNCENSORED_LABEL if mname == UNCENSORED else mname
            rows.append((name, shown, _fmt(value), "" if extra.get("groups") else _ci(extra, unit),
                         str(extra["n"]), "", "", "") + pad)
    return rows


#: how tables name the score over the uncensored items (metric `uncensored_bound`)
UNCENSORED_LABEL = "uncensored only (bound)"


def _unit(cluster_by: str | None) -> str:
    """What an interval resamples, in words: `meeting_id` -> "meeting"."""
    if not cluster_by:
        return "item"
    return cluster_by.removesuffix("_id").replace("_", " ")


def _ci(block: dict[str, Any], unit: str = "item") -> str:
    spread = block.get("spread") or {}
    if spread.get("ci_low") is not None:
        return f"[{spread['ci_low']:.2f}, {spread['ci_high']:.2f}]"
    if not block.get("n"):
        return "n/a: no score"
    clusters = spread.get("clusters")
    if clusters == 1:  # resampling one cluster always gives the same mean
        return f"n/a: 1 {unit} only"
    return "n/a"
