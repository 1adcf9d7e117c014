"""What each CLI command does, as plain functions returning text or paths, so tests and
other programs call them without a subprocess. Heavy modules are imported inside.

Each takes the `plugins` the command line loaded (once per command); called from a program
without them, it loads the installed plugins itself (minus `disabled_plugins`)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import yaml

from lceval.engine import Catalog, Plugins, RunConfig, default_cache_path, load_catalog, load_plugins
from lceval.errors import UserError


def _plugins(plugins: Plugins | None, disabled: Sequence[str] | None) -> Plugins:
    return plugins if plugins is not None else load_plugins(list(disabled or []))


def _env(plugins: Plugins | None, disabled: Sequence[str] | None) -> tuple[Plugins, Catalog]:
    """The command's plugins and the catalog over them."""
    plugins = _plugins(plugins, disabled)
    return plugins, load_catalog(plugins)


def _config(config: RunConfig | None, fields: dict[str, Any]) -> RunConfig:
    """`run(config)`, or `run(tasks=..., models=[...], ...)` with RunConfig's fields."""
    if config is None:
        config = RunConfig(**fields)
    elif fields:
        raise TypeError("pass a RunConfig or its fields, not both")
    return config


def run(config: RunConfig | None = None, *, plugins: Plugins | None = None, **fields: Any) -> list[tuple[Path, str]]:
    """Evaluate each model of the config; returns (run directory, console table) per model.
    Everything the command says is checked before anything is opened or written."""
    from lceval.engine import Cache, cache_failures, execute, plan_run
    from lceval.io import check_writable, data_home, using_data_home
    from lceval.results import console_text, write_run

    config = _config(config, fields)
    plugins, catalog = _env(plugins, config.disabled_plugins)
    plan = plan_run(config, plugins, catalog)
    home = Path(config.data_home or data_home())
    # hours of generation must not end in "cannot write": the folder is probed before any model loads
    check_writable(Path(config.output))
    cache = Cache(config.cache_path or default_cache_path())
    reports = []
    try:
        for model in plan.models:
            with using_data_home(home), cache_failures(cache.path):
                state = execute(plan, model, plugins, cache, home)
            run_dir, results = write_run(state, plugins, Path(config.output))
            reports.append((run_dir, console_text(state, results)))
    finally:
        cache.close()
    return reports


def dry_run(config: RunConfig | None = None, *, plugins: Plugins | None = None, **fields: Any) -> str:
    """`lceval run --dry-run`: the prompts each model would be sent, with the context policy
    applied where its tokenizer can be had; nothing generated, cached or written."""
    from lceval.engine import dry_run as preview
    from lceval.engine import plan_run
    from lceval.io import data_home, using_data_home

    config = _config(config, fields)
    plugins, catalog = _env(plugins, config.disabled_plugins)
    plan = plan_run(config, plugins, catalog)
    home = Path(config.data_home or data_home())
    with using_data_home(home):
        return "\n".join(f"# model {model.text}\n{preview(plan, model, plugins, home)}" for model in plan.models)


def list_tasks(disabled: Sequence[str] = (), *, plugins: Plugins | None = None) -> str:
    _, catalog = _env(plugins, disabled)
    lines = []
    width = max((len(n) for n in catalog.specs), default=4)
    for name in sorted(catalog.specs):
        try:
            desc = catalog.spec(name).description
        except UserError as exc:
            desc = f"(invalid spec: {exc.render()})"
        lines.append(f"{name.ljust(width)}  {desc}")
    if catalog.suites:
        lines.append("\nsuites:")
        for suite, members in sorted(catalog.suites.items()):
            lines.append(f"{suite.ljust(width)}  {', '.join(members)}")
    if catalog.models:
        lines.append("\nmodel aliases:")
        for alias in sorted(catalog.models.values(), key=lambda a: a.name):
            lines.append(f"{alias.name.ljust(width)}  {alias.spec}")
    return "\n".join(lines)


def show_task(name: str, disabled: Sequence[str] = (), *, plugins: Plugins | None = None) -> str:
    plugins, catalog = _env(plugins, disabled)
    (spec,) = catalog.resolve_tasks(name)[:1]
    from lceval.engine import check_options, check_references

    check_options(spec, check_references(spec, plugins).options_schema, plugins)
    header = f"# {spec.name}: resolved spec (defaults filled) from {spec.path}\n"
    return header + yaml.safe_dump(spec.data, sort_keys=False, allow_unicode=True, width=100)


def list_plugins(disabled: Sequence[str] = (), name: str | None = None, *, plugins: Plugins | None = None) -> str:
    """Every plugin with its kinds, distribution and status, then the clashes; or, with `name`,
    what that plugin (or the thing of that name) is and the options it takes."""
    from lceval.cli._plugin_listing import describe_plugin, plugin_table

    plugins = _plugins(plugins, disabled)
    if name:
        return describe_plugin(plugins, name)
    load_catalog(plugins)  # task-name clashes join the plugins' own in the listing
    return plugin_table(plugins)


def _check_against_data(spec: Any, task_type: Any, plugins: Plugins) -> None:
    """`TaskType.check`: the spec against its data (a dataset's first rows), before any model
    loads. An error about one of the spec's options (`field="options.x"`, no file) is placed at
    that option's line of the spec file, as a run would place it."""
    from lceval.interfaces import TaskContext
    from lceval.io import data_home, line_of

    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=data_home(), splits=spec.splits, limit=None,
                      record_file=lambda path: None, retrievers=dict(plugins.retrievers))
    try:
        task_type.check(ctx)
    except UserError as exc:
        if exc.file or not (exc.field or "").startswith("options."):
            raise
        at = tuple(int(p) if p.isdigit() else p for p in exc.field.split("."))
        raise UserError(exc.message, file=spec.path, field=exc.field, line=line_of(spec.lines, at),
                        hint=exc.hint) from None


def _check_judge_options(spec: Any, plugins: Plugins) -> None:
    """The spec's `judge.options` against the judge's declared options (a metric option of
    the wrong type), at their line of the spec, without building the judge (which may need a
    judge model)."""
    from lceval.io import line_of
    from lceval.options import check_options

    choice = spec.judge
    schema = getattr(plugins.judges.get(choice.name), "options_schema", None)
    if not schema:
        return
    try:
        check_options(schema, choice.options, what=f"judge '{choice.name}'", field_prefix="judge.options.")
    except UserError as exc:
        at = tuple((exc.field or "judge.options").split("."))
        raise UserError(exc.message, file=spec.path, field=exc.field, line=line_of(spec.lines, at),
                        hint=exc.hint) from None


def validate(paths: list[str], disabled: Sequence[str] = (), *, plugins: Plugins | None = None) -> tuple[str, bool]:
    """Check spec files (schema, their type's options, that every plugin they name exists, and
    what the task type checks against its data) and plugin packages; never runs a model."""
    from lceval.cli._plugin_check import check_plugin_package
    from lceval.engine import check_options, check_references, load_spec

    plugins = _plugins(plugins, disabled)
    out, ok = [], True
    for raw in paths:
        path = Path(raw)
        try:
            if path.is_dir():
                out.extend(check_plugin_package(path, list(disabled)))
                continue
            spec = load_spec(path)
            task_type = check_references(spec, plugins)
            check_options(spec, task_type.options_schema, plugins)
            _check_judge_options(spec, plugins)
            _check_against_data(spec, task_type, plugins)
            out.append(f"ok      {path} (task '{spec.name}', type '{spec.type}')")
        except UserError as exc:
            ok = False
            out.append(f"invalid {exc.render()}")
    return "\n".join(out), ok


def fetch_data(name: str, source: str | None, home: Path | None, disabled: Sequence[str] = (), *,
               plugins: Plugins | None = None) -> str:
    from lceval.io import fetch

    plugins = _plugins(plugins, disabled)
    dataset = plugins.get("dataset", name)
    rep = fetch(dataset, source, home, progress=sys.stderr.isatty())
    return f"{rep.name}: {rep.status} at {rep.path}"


def list_datasets(home: Path | None, disabled: Sequence[str] = (), *, plugins: Plugins | None = None) -> str:
    from lceval.io import data_home

    plugins = _plugins(plugins, disabled)
    root = home or data_home()
    lines = []
    for name, ds in sorted(plugins.datasets.items()):
        present = "installed" if (root / name / "CHECKSUMS.json").is_file() else "not fetched"
        lines.append(f"{name}  [{present}]  {ds.description}")
    return "\n".join(lines) + f"\n(data home: {root})"


def paths(home: Path | None = None, cache: Path | None = None) -> str:
    """`lceval data paths`: the data home and the cache a command would use, and where each
    choice comes from, so `$LCEVAL_DATA` in the README's examples can be looked up."""
    from lceval.io import data_home

    def origin(flag: Path | None, env: str) -> str:
        if flag is not None:
            return "--data-home" if env == "LCEVAL_DATA" else "--cache"
        return f"${env}" if os.environ.get(env) else f"default (set ${env} to change it)"

    data, cache_file = Path(home or data_home()), Path(cache or default_cache_path())
    installed = sorted(p.name for p in data.iterdir() if (p / "CHECKSUMS.json").is_file()) if data.is_dir() else []
    data_state = ("does not exist yet: `lceval data fetch NAME` creates it" if not data.exists() else
                  f"datasets: {', '.join(installed)}" if installed else "exists, no dataset fetched yet")
    cache_state = (f"exists, {cache_file.stat().st_size / 1e6:.1f} MB" if cache_file.is_file() else
                   "does not exist yet: the first run creates it")
    lines = [f"data home: {data}  [{origin(home, 'LCEVAL_DATA')}]",
             f"           {data_state}",
             f"cache:     {cache_file}  [{origin(cache, 'LCEVAL_CACHE')}]",
             f"           {cache_state}"]
    return "\n".join(lines)


def report(run_dirs: list[Path | str], fmt: str, *, pooled: bool = False, where: list[str] | None = None,
           by: list[str] | None = None, disabled_plugins: list[str] | None = None,
           plugins: Plugins | None = None) -> str:
    """`table`/`json`: each run's own results; `markdown`/`csv`/`latex`: the papers' tables
    (models x tasks x groups, breakdowns per group or `pooled`, tests) over all the runs
    given. Inputs are run directories or recorded score files; `where` (FIELD=VALUE) keeps a
    subset of the samples and `by` adds breakdowns, both re-scored from the samples."""
    from lceval.results import format_table
    from lceval.report import load_inputs, parse_where, rescored

    plugins, catalog = _env(plugins, disabled_plugins)

    def spec_of(task: str) -> dict[str, Any]:
        if task not in catalog.specs:
            raise UserError(f"recorded scores name task '{task}', which is not installed", field="run_dirs")
        return catalog.spec(task).data

    runs = [rescored(r, parse_where(where or []), by or [])
            for r in load_inputs([str(d) for d in run_dirs], plugins, spec_of)]
    if fmt in ("markdown", "csv", "latex"):
        from lceval.report import paper_tables

        return paper_tables(runs, fmt, pooled=pooled, subset=", ".join(where or []))
    blocks = []
    for run in runs:
        if fmt == "json":
            blocks.append(json.dumps(run.results, indent=2))
        else:
            blocks.append(f"## {run.run_id} ({run.model})\n\n{format_table(run.results)}")
    return "\n\n".join(blocks)


def report_html(paths: list[Path], output: str | Path | None, *, agreement: list[str] | None = None,
                bins_of: str | None = None, title: str | None = None,
                disabled_plugins: list[str] | None = None,
                plugins: Plugins | None = None) -> Path:
    """`lceval report --format html -o FILE`: runs, rankings and agreement in one page."""
    from lceval.report import write_report

    if not output:
        raise UserError("--format html writes a file: pass -o FILE.html", field="-o")
    return write_report(paths, Path(output), _plugins(plugins, disabled_plugins), agreement=agreement,
                        bins_of=bins_of, title=title)


def score(*, run_dir: Path, judge: str, judge_model: str | None = None, output: Path | None = None,
          cache_path: Path | None = None, disabled_plugins: list[str] | None = None,
          plugins: Plugins | None = None,
          command: list[str] | None = None) -> tuple[Path, str]:
    """Re-judge a finished run into a new run directory (the source stays as it is)."""
    from lceval.engine import Cache, cache_failures
    from lceval.results import console_text, write_run
    from lceval.results import rescore_run
    from lceval.results import load_run

    from lceval.io import check_writable

    plugins, catalog = _env(plugins, disabled_plugins)
    run = load_run(Path(run_dir))
    check_writable(Path(output) if output else run.path.parent)
    cache = Cache(cache_path or default_cache_path())
    try:
        with cache_failures(cache.path):
            state = rescore_run(run, judge, judge_model, plugins, catalog, cache, command or [])
        final, results = write_run(state, plugins, Path(output) if output else run.path.parent)
    finally:
        cache.close()
    return final, console_text(state, results)


def merge(run_dirs: list[Path], *, output: Path | None = None, disabled_plugins: list[str] | None = None,
          plugins: Plugins | None = None,
          command: list[str] | None = None) -> tuple[Path, str]:
    """Join the shards of one run into the run directory one machine would have written."""
    from lceval.results import merge_runs
    from lceval.results import format_table, write_run
    from lceval.results import load_run

    plugins, catalog = _env(plugins, disabled_plugins)
    runs = [load_run(Path(d)) for d in run_dirs]
    state = merge_runs(runs, catalog, command or [])
    final, results = write_run(state, plugins, Path(output) if output else runs[0].path.parent)
    return final, format_table(results)


def compare(run_a: Path, run_b: Path, tasks: list[str] | None, fmt: str, seed: int = 0) -> str:
    from lceval.analysis import compare_runs, format_comparison
    from lceval.results import load_run

    a, b = load_run(Path(run_a)), load_run(Path(run_b))
    return format_comparison(a, b, compare_runs(a, b, tasks, seed=seed), fmt)


def judge_agreement(sources: list[str], *, task: str | None = None, bins_of: str | None = None,
                    fmt: str = "markdown", n_boot: int = 1000, seed: int = 0, resample: str = "clusters",
                    disabled_plugins: list[str] | None = None,
                    plugins: Plugins | None = None) -> str:
    from lceval.analysis import agreement, format_agreement, merge_sources, read_sources

    plugins = _plugins(plugins, disabled_plugins)
    found = merge_sources([s for arg in sources for s in read_sources(arg, plugins, task)])
    rep = agreement(found, bins_of=bins_of, n_boot=n_boot, seed=seed, resample=resample)
    return json.dumps(rep, indent=2) if fmt == "json" else format_agreement(rep)


def rank(run_dirs: list[Path], *, judge: str | None = None, judge_model: str | None = None,
         options: Any = None, output: Path = Path("rankings"), fmt: str = "table",
         cache_path: Path | None = None, disabled_plugins: list[str] | None = None,
         plugins: Plugins | None = None) -> tuple[Path, str]:
    """Rank the systems of finished runs with a pairwise judge; writes a rankings directory
    and returns it with the text to print (`table`, `markdown` or `json`)."""
    from lceval.engine import Cache, cache_failures
    from lceval.engine import open_judge_model, resolve_judge_model
    from lceval.analysis import RankOptions, collect_systems, make_pairwise_judge
    from lceval.analysis import rank as rank_systems
    from lceval.analysis import format_ranking, write_ranking
    from lceval.results import load_run

    opts = options or RankOptions()
    opts.check()
    plugins, catalog = _env(plugins, disabled_plugins)
    runs = [load_run(Path(d)) for d in run_dirs]
    systems, section = collect_systems(runs, opts.tasks)
    flag = judge or opts.judge or section.get("judge")
    if not flag:
        raise UserError("no pairwise judge: the task spec has no rank.judge", field="--judge",
                        hint=f"Pass --judge NAME (installed: {', '.join(sorted(plugins.pairwise_judges)) or 'none'}).")
    jspec = resolve_judge_model(judge_model, catalog, plugins)
    from lceval.io import check_writable

    check_writable(Path(output))
    cache = Cache(cache_path or default_cache_path())
    model = None
    try:
        with cache_failures(cache.path):
            model = open_judge_model(jspec, cache)
            pairwise_judge = make_pairwise_judge(flag, plugins, model, opts.seed)
            ranking = rank_systems(runs, pairwise_judge, flag, opts, systems, section)
        if model is not None:
            ranking.report["judge_usage"] = model.usage.as_dict()
            ranking.report["judge_backend_stats"] = model.backend.stats()
    finally:
        if model is not None:
            model.backend.close()
        cache.close()
    task = systems[0].task if len({s.task for s in systems}) == 1 else "tasks"
    path = write_ranking(ranking, Path(output), f"rank-{task}-{time.strftime('%Y%m%d-%H%M%S')}")
    if fmt == "json":
        return path, json.dumps(ranking.report, indent=2, ensure_ascii=False)
    return path, format_ranking(ranking, markdown=fmt == "markdown")


def submit(run_dirs: list[Path], output: Path, name: str | None = None,
           disabled_plugins: list[str] | None = None, *, plugins: Plugins | None = None) -> Path:
    """`lceval submit`: a leaderboard bundle of finished runs."""
    from lceval.leaderboard import submit as pack

    return pack(run_dirs, output, _plugins(plugins, disabled_plugins), name)


def verify(bundle: Path, *, rejudge: int = 200, seed: int = 0, accept_unpinned: bool = False, fmt: str = "text",
           data_home: Path | None = None, disabled_plugins: list[str] | None = None,
           plugins: Plugins | None = None) -> tuple[str, bool]:
    """`lceval verify`: (the report, whether the bundle is accepted)."""
    from lceval.io import data_home as default_home
    from lceval.leaderboard import format_verification, verify_bundle

    plugins, catalog = _env(plugins, disabled_plugins)
    result = verify_bundle(bundle, plugins, catalog, Path(data_home or default_home()), rejudge=rejudge, seed=seed,
                           accept_unpinned=accept_unpinned)
    text = json.dumps(result.as_dict(), indent=1) if fmt == "json" else format_verification(result)
    return text, result.ok


def leaderboard(bundles: list[Path], output: Path, *, title: str = "lceval leaderboard", verify: bool = True,
                rejudge: int = 200, data_home: Path | None = None, disabled_plugins: list[str] | None = None,
                plugins: Plugins | None = None) -> str:
    """`lceval leaderboard`: a static site (index + a page per submission) from bundles."""
    from lceval.io import data_home as default_home
    from lceval.leaderboard import write_site

    plugins, catalog = _env(plugins, disabled_plugins)
    return write_site(bundles, output, plugins, catalog, Path(data_home or default_home()), title=title,
                      verify=verify, rejudge=rejudge)
