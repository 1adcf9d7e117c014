"""MkDocs hook: the pages that must follow the code are generated from it at build time.

- `tasks/catalog.md`: every built-in task of `lceval tasks`, read through lceval's public
  API (`lceval.engine.load_plugins`, `load_catalog`): its setting, paper, type, dataset,
  splits, judge, metrics, default context policy, and the suites that hold it.
- `api/<module>.md`: the API reference of each public module (`API_MODULES`), rendered from
  its docstrings by mkdocstrings.
- `tasks/fidelity.md`: the fidelity ledger, per family what is identical to the authors' code
  (prompts, caps, cut, metric), what differs and by how much, the commit it was checked against
  and the published answers re-scored, from each spec folder's `_family.yaml` and the specs'
  `report.differs_from_paper` (`fidelity_ledger`).
- `contributing.md`: CONTRIBUTING.md from the repository root, so the contributor's guide is
  one text, in the site and on GitHub.
- `<!-- lceval-options: KIND NAME -->` in a page becomes the table of that plugin's typed
  options (`lceval.options.describe` of its `options_schema`), what `lceval plugins NAME`
  prints; an unknown plugin fails the build.
- the papers cited by authors and year ("Thonet et al., 2024a" ... "Gong et al., 2024") in
  generated text (spec descriptions, CONTRIBUTING, the docstrings the API reference renders)
  become citation links to the references page (and the older numbering by the papers' order in DESIGN.md);
  hand-written pages link directly.

It also lays out `build/griffe/lceval`, a link to `src/core`, so that mkdocstrings (griffe)
finds the import package `lceval`, whose folder is not named like it.
"""

from __future__ import annotations

import posixpath
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]

#: the four papers: how the docs cite them and their anchor on references.md
PAPERS = {
    "000": ("Thonet et al., 2024a", "thonet-2024a"),
    "001": ("Thonet et al., 2024b", "thonet-2024b"),
    "002": ("Laban et al., 2024", "laban-2024"),
    "003": ("Gong et al., 2024", "gong-2024"),
}
#: a spec's `citation:` names its paper by first author; the extended ELITR-Bench paper is
#: told apart by the description (the noise tasks say "Thonet et al., 2024b")
FIRST_AUTHORS = {"Thonet": "000", "Laban": "002", "Gong": "003"}
PAPER_RE = re.compile(r"\b[Pp]apers? (00[0-3])\b")
#: a citation by authors and year not already the label of a link (markdown) or a link's text (HTML)
_LABELS = "|".join(re.escape(label) for label, _ in PAPERS.values())
CITED_MD = re.compile(rf"(?<!\[)\b({_LABELS})(?![a-z\]])")
CITED_HTML = re.compile(rf"\b({_LABELS})(?![a-z]|</a>)")
BY_LABEL = {label: number for number, (label, _) in PAPERS.items()}
OPTIONS_RE = re.compile(r"^<!-- lceval-options: ([a-z-]+) ([A-Za-z0-9_.:-]+) -->$", re.M)
#: task folders described on a page not named after them (the others: docs/tasks/<folder>.md)
BENCHMARK_PAGES = {"longbench_v2": "tasks/longbench.md", "infinitebench": "tasks/longbench.md"}
LIST_RE = re.compile(r"^<!-- lceval-plugins: ([a-z-]+) -->$", re.M)
HARNESSES_RE = re.compile(r"^<!-- lceval-harnesses -->$", re.M)
HARNESSES = ROOT / "docs" / "_data" / "harnesses.yaml"
#: the API reference: one page per public module (docs/plugins.md, "The public API"), each the
#: module's docstrings through mkdocstrings; mkdocs.yml's nav lists the same pages. A public module
#: kept only so that plugins written against an older lceval still import (a re-export of one
#: listed here) gets no page: the docs send readers to the module it re-exports.
API_MODULES = ("lceval", "lceval.interfaces", "lceval.types", "lceval.errors", "lceval.needs", "lceval.options",
               "lceval.hookspecs", "lceval.methods", "lceval.judging", "lceval.tokens", "lceval.hf_tokens", "lceval.reasoning", "lceval.stats",
               "lceval.io", "lceval.results", "lceval.analysis", "lceval.report",
               "lceval.engine", "lceval.launch")


def _rel(from_page: str, target: str) -> str:
    return posixpath.relpath(target, posixpath.dirname(from_page) or ".")


def cite(text: str, page: str) -> str:
    """'Thonet et al., 2024a' (or the older numbering) -> '[Thonet et al., 2024a](../references.md#thonet-2024a)'
    (relative to `page`)."""
    def link(number: str) -> str:
        label, anchor = PAPERS[number]
        return f"[{label}]({_rel(page, 'references.md')}#{anchor})"
    text = CITED_MD.sub(lambda m: link(BY_LABEL[m.group(1)]), text)
    return PAPER_RE.sub(lambda m: link(m.group(1)), text)


def _plugins():
    from lceval.engine import load_plugins
    return load_plugins()


# ---------------------------------------------------------------- griffe's view of lceval
def on_startup(command: str, dirty: bool) -> None:
    """Before any plugin reads its configuration: mkdocstrings drops search paths that do
    not exist yet, so the link must be there before its on_config."""
    link = ROOT / "build" / "griffe" / "lceval"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(ROOT / "src" / "core", target_is_directory=True)
        except OSError:  # no symlinks (Windows without the privilege): a copy will do
            shutil.copytree(ROOT / "src" / "core", link, symlinks=False)


# ---------------------------------------------------------------- generated pages
def on_files(files: Files, config: Any) -> Files:
    plugins = _plugins()
    pages = {f.src_uri for f in files.documentation_pages()}
    files.append(File.generated(config, "tasks/catalog.md", content=task_catalog(plugins, pages, config)))
    files.append(File.generated(config, "tasks/fidelity.md", content=fidelity_ledger(plugins, pages)))
    files.append(File.generated(config, "contributing.md", content=contributing()))
    for module in API_MODULES:
        files.append(File.generated(config, f"api/{module}.md", content=api_page(module)))
    return files


def api_page(module: str) -> str:
    """A module's reference; a module it exports by name (`lceval.report.charts`) gets a
    section of its own, since mkdocstrings renders no submodule inside its parent."""
    import importlib
    import inspect

    mod = importlib.import_module(module)
    out = [f"# `{module}`", "", f"::: {module}", ""]
    for name in getattr(mod, "__all__", []):
        if inspect.ismodule(getattr(mod, name, None)):
            out += [f"::: {module}.{name}", "    options:", "      show_root_heading: true", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    uri = page.file.src_uri
    if uri == "contributing.md":
        markdown = cite(markdown, uri)
    if OPTIONS_RE.search(markdown) or LIST_RE.search(markdown):
        plugins = _plugins()
        markdown = OPTIONS_RE.sub(lambda m: cite(options_table(plugins, m.group(1), m.group(2)), uri), markdown)
        markdown = LIST_RE.sub(lambda m: cite(plugins_table(plugins, m.group(1)), uri), markdown)
    if HARNESSES_RE.search(markdown):
        table = harness_table(_plugins(), {f.src_uri for f in files.documentation_pages()}, uri)
        markdown = HARNESSES_RE.sub(lambda m: table, markdown)
    return markdown


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """The API reference renders docstrings, which cite the papers by authors and year (as code
    comments do): in the site they become citation links too."""
    if not page.file.src_uri.startswith("api/"):
        return html
    target = posixpath.relpath("references/", page.url or ".")

    def link(number: str) -> str:
        label, anchor = PAPERS[number]
        return f'<a href="{target}/#{anchor}">{label}</a>'
    html = CITED_HTML.sub(lambda m: link(BY_LABEL[m.group(1)]), html)
    return PAPER_RE.sub(lambda m: link(m.group(1)), html)


def contributing() -> str:
    """CONTRIBUTING.md as a page: links into the repository become plain paths (the site
    holds only docs/), links into docs/ become site links."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")

    def fix(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        if target.startswith("docs/"):
            return f"[{label}]({target[len('docs/'):]})"
        return f"{label} (`{target}` in the repository)"
    return re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", fix, text)


# ---------------------------------------------------------------- option tables
KIND_TABLES = {"model": "models", "backend": "models", "judge": "judges", "pairwise-judge": "pairwise_judges",
               "retriever": "retrievers", "task-type": "task_types", "method": "methods"}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def options_table(plugins: Any, kind: str, name: str) -> str:
    from lceval.options import describe, options_schema_of

    if kind not in KIND_TABLES:
        raise ValueError(f"lceval-options: unknown kind '{kind}' (known: {', '.join(KIND_TABLES)})")
    table = getattr(plugins, KIND_TABLES[kind])
    if name not in table:
        raise ValueError(f"lceval-options: no {kind} '{name}' is registered (known: {', '.join(sorted(table))})")
    value = table[name]
    schema = value.options_schema if kind == "task-type" else options_schema_of(value)
    rows = describe(schema)
    lead = ""
    if kind == "model":  # as `lceval plugins NAME`: the options lceval reads itself, whichever the backend
        from lceval.engine import ModelSpec

        lead = "" if rows else f"*The {kind} `{name}` takes no options of its own; every backend takes these:*\n\n"
        rows += [replace(r, description=f"(every backend) {r.description}")
                 for r in describe({"type": "object", "properties": ModelSpec.ENGINE_OPTIONS})]
    if not rows:
        return f"*The {kind} `{name}` takes no options.*"
    out = ([lead.rstrip("\n"), ""] if lead else []) + ["| option | type | default | what |", "| --- | --- | --- | --- |"]
    for r in rows:
        default = "" if r.default == "-" else f"`{_cell(r.default)}`"
        out.append(f"| `{r.name}` | {_cell(r.type)} | {default} | {_cell(r.description)} |")
    return "\n".join(out)


def _summary(value: Any) -> str:
    """The first paragraph of what documents a registered factory or class (its module's
    docstring for a function, which says what the plugin is; else the class's)."""
    import inspect

    target = getattr(value, "factory", value)
    described = getattr(target, "description", None)  # a factory object that says what it builds
    if isinstance(described, str) and described:
        return described
    module = inspect.getmodule(target)
    doc = ((module.__doc__ if module else None) or target.__doc__) if inspect.isfunction(target) \
        else (target.__doc__ or (module.__doc__ if module else None))
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ")


def plugins_table(plugins: Any, kind: str) -> str:
    """Every built-in plugin of one kind: its name, what it is, the options it takes."""
    from lceval.options import describe, options_schema_of

    if kind not in KIND_TABLES:
        raise ValueError(f"lceval-plugins: unknown kind '{kind}' (known: {', '.join(KIND_TABLES)})")
    infos = {i.name: i for i in plugins.infos}
    table = getattr(plugins, KIND_TABLES[kind])
    out = [f"| {kind} | what | options |", "| --- | --- | --- |"]
    for name in sorted(table):
        owner = infos.get(plugins.owner.get(("model" if kind == "backend" else kind, name), ""))
        if owner is None or not owner.builtin:
            continue
        value = table[name]
        schema = value.options_schema if kind == "task-type" else options_schema_of(value)
        options = ", ".join(f"`{r.name}`" for r in describe(schema)) or "none"
        out.append(f"| `{name}` | {_cell(_summary(value))} | {options} |")
    return "\n".join(out)


# ---------------------------------------------------------------- the task catalog
def _builtin_specs(plugins: Any, catalog: Any) -> dict[str, Path]:
    """Tasks of lceval's own catalog and of its built-in plugins (a third-party plugin
    installed where the site is built does not enter lceval's documentation)."""
    from importlib import resources

    infos = {i.name: i for i in plugins.infos}
    roots = [Path(str(resources.files("lceval").joinpath("tasks"))).resolve()]
    for folder in plugins.spec_dirs:
        owner = infos.get(plugins.owner.get(("specs", str(folder)), ""))
        if owner is not None and owner.builtin:
            roots.append(Path(folder).resolve())
    return {name: path for name, path in catalog.specs.items()
            if any(Path(path).resolve().is_relative_to(r) for r in roots)}


def _paper_of(spec: Any) -> str | None:
    described = PAPER_RE.findall(spec.description)
    if described:
        return described[0]
    citation = spec.data.get("citation") or ""
    return next((n for author, n in FIRST_AUTHORS.items() if citation.startswith(author)), None)


def _title(config: Any, page: str) -> str:
    """A page's first heading (its title in the site)."""
    path = Path(config["docs_dir"]) / page
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page


def task_catalog(plugins: Any, pages: set[str], config: Any) -> str:
    from lceval.engine import load_catalog

    page = "tasks/catalog.md"
    catalog = load_catalog(plugins)
    specs = _builtin_specs(plugins, catalog)
    suites_of: dict[str, list[str]] = {}
    for suite in sorted(catalog.suites):
        for task in _expand(catalog, suite):
            suites_of.setdefault(task, []).append(suite)
    by_family = {key: [n for n in names if n in specs] for key, names in catalog.by_family().items()}
    by_family = {key: names for key, names in by_family.items() if names}

    out = [
        "# Task catalog",
        "",
        "Every built-in task, as `lceval tasks` lists it; this page is generated from the task specs "
        "(`tasks/<benchmark>/*.yaml`) each time the site is built, so it cannot drift from them. "
        "`lceval tasks show NAME` prints one resolved spec. *Splits* are the spec's `splits` "
        "(all of the dataset's when it names none); *judge* is the spec's default, which "
        "`--judge` replaces; *metrics* are reported beside the score, with the same groups and "
        "intervals; *context* is the default context policy (`--context-policy` overrides it; "
        "see [Long contexts](../context.md)).",
        "",
    ]
    for key, family_names in by_family.items():
        family = catalog.family(key)
        bench_page = family.page or BENCHMARK_PAGES.get(key, f"tasks/{key}.md")
        out += [f"## {family.name} {{#{key}}}", ""]
        if family.citation:
            out += [f"{cite(family.citation, page)}; {len(family_names)} task(s), in `tasks/{key}/`.", ""]
        if bench_page in pages:
            out += [f"How to run these and what they report: [{_title(config, bench_page)}]({_rel(page, bench_page)}).",
                    ""]
        names = sorted(family_names)
        out += ["| task | setting | type | judge | splits |", "| --- | --- | --- | --- | --- |"]
        for name in names:
            spec = catalog.spec(name)
            splits = ", ".join(spec.splits) if spec.splits else "all"
            out.append(f"| [`{name}`](#{name}) | {cite(_cell(spec.description), page)} | `{spec.type}` "
                       f"| `{spec.judge.name}` | {splits} |")
        out.append("")
        for name in names:
            out += _task_entry(plugins, catalog.spec(name), suites_of.get(name, []), page)
    if catalog.suites:
        out += ["## Suites", "", "`--tasks SUITE` runs every task of a suite (suites may hold suites).", "",
                "| suite | tasks |", "| --- | --- |"]
        for suite in sorted(catalog.suites):
            out.append(f"| `{suite}` | {', '.join(f'`{t}`' for t in catalog.suites[suite])} |")
        out.append("")
    if catalog.models:
        out += ["## Model aliases", "", "| alias | model spec | what |", "| --- | --- | --- |"]
        for alias in sorted(catalog.models.values(), key=lambda a: a.name):
            out.append(f"| `{alias.name}` | `{_cell(alias.spec)}` | {_cell(alias.description)} |")
        out.append("")
    if catalog.judges:
        out += ["## Judge presets", "", "`--judge PRESET` is a judge with options set "
                "(see [Judges](../judges.md)).", "", "| preset | judge | options |", "| --- | --- | --- |"]
        for preset, entry in sorted(catalog.judges.items()):
            opts = ", ".join(f"`{k}={v}`" for k, v in entry["options"].items()) or ""
            out.append(f"| `{preset}` | `{entry['name']}` | {opts} |")
        out.append("")
    return "\n".join(out) + "\n"


def _expand(catalog: Any, name: str) -> list[str]:
    if name in catalog.suites:
        return [t for member in catalog.suites[name] for t in _expand(catalog, member)]
    return [name]


def _task_entry(plugins: Any, spec: Any, suites: list[str], page: str) -> list[str]:
    paper = _paper_of(spec)
    citation = spec.data.get("citation")
    if paper:
        label, anchor = PAPERS[paper]
        paper_cell = f"[{label}]({_rel(page, 'references.md')}#{anchor})"
        if citation:
            paper_cell += f": {_cell(citation)}"
    else:
        paper_cell = _cell(citation) if citation else "none (not from a paper)"
    judge = spec.judge
    judge_cell = f"`{judge.name}`" + (f" ({', '.join(f'{k}={v}' for k, v in judge.options.items())})"
                                      if judge.options else "")
    report = spec.report
    metrics = ["score"] + [m.label for m in spec.metrics] + list(report.metrics)
    rows = [
        ("setting", cite(_cell(spec.description), page)),
        ("paper", paper_cell),
        ("type", f"`{spec.type}`"),
        ("dataset", f"`{spec.dataset}`" if spec.dataset else "none"),
        ("splits", ", ".join(f"`{s}`" for s in spec.splits) if spec.splits else "all of the dataset's"),
        ("judge", judge_cell),
        ("metrics", ", ".join(f"`{m}`" for m in metrics)),
        ("grouped by", f"`{report.group_by}`" if report.group_by else "nothing (one overall score)"),
        ("intervals resample", f"`{report.cluster_by}`" if report.cluster_by else "single items"),
        ("tests", ", ".join(f"`{t.name}` ({t.kind})" for t in report.tests) or "none"),
        ("context", f"`{spec.context.policy}`"),
        ("suites", ", ".join(f"`{s}`" for s in suites) or "none"),
    ]
    out = [f"### `{spec.name}` {{#{spec.name}}}", "", "| | |", "| --- | --- |"]
    out += [f"| {k} | {v} |" for k, v in rows]
    return out + [""]


# ---------------------------------------------------------------- the fidelity ledger
ASPECTS = ("prompts", "caps", "cut", "metric")


def _published_rows(key: str) -> int | None:
    """Rows of the family's published-answers fixture (tests/plugins/judges/test_published_predictions.py
    re-scores every one against the authors' score), None when it has none."""
    import json

    path = ROOT / "tests" / "data" / key / "published.json"
    if not path.is_file():
        return None
    return len(json.loads(path.read_text(encoding="utf-8"))["rows"])


def fidelity_ledger(plugins: Any, pages: set[str]) -> str:
    """Per family: the authors' commit it was checked against, what is identical, what differs
    (the family file's departures and the specs' own `report.differs_from_paper`) and the
    published answers re-scored. A catalog family without a family file fails the build."""
    from lceval.engine import family_file, load_catalog

    page = "tasks/fidelity.md"
    catalog = load_catalog(plugins)
    specs = _builtin_specs(plugins, catalog)
    families = {key: [n for n in names if n in specs] for key, names in catalog.by_family().items()}
    families = {key: names for key, names in families.items() if names}
    records = {}
    for key, names in families.items():
        folders = {Path(specs[n]).parent for n in names}
        found = [family_file(f) for f in sorted(folders)]
        found = [f for f in found if f is not None and f.fidelity is not None]
        if not found:
            raise ValueError(f"family '{key}' ({', '.join(str(f) for f in sorted(folders))}) has no _family.yaml "
                             "with a fidelity record")
        records[key] = found[0].fidelity
    out = [
        "# Fidelity ledger",
        "",
        "How close each family's tasks are to the protocol behind the paper's numbers, family by family: the "
        "authors' code it was compared with (repository and commit), what lceval does exactly as that code does "
        "(prompts, answer caps and decoding, the cut of a long context, the metric) and how that is known, the "
        "authors' published answers re-scored by lceval in the test suite, and every departure kept on purpose "
        "with its measured effect. A task whose spec carries a departure (`report.differs_from_paper`) has its "
        "number marked † in the console, the tables and the report: it is not comparable with the paper's as it "
        "stands. This page is generated from each spec folder's `_family.yaml` and the specs each time the site "
        "is built.",
        "",
        "| family | checked against | " + " | ".join(ASPECTS) + " | published answers re-scored | tasks marked † |",
        "| --- | --- | " + " | ".join("---" for _ in ASPECTS) + " | --- | --- |",
    ]
    sections = []
    for key, names in families.items():
        family, record = catalog.family(key), records[key]
        marked = {n: catalog.spec(n).report.differs_from_paper for n in names}
        flagged = sorted(n for n, why in marked.items() if why)
        rows = _published_rows(key)
        commit = _source_cell(record)
        cells = ["same" if a in record.identical else "—" for a in ASPECTS]
        published = f"{rows} rows, all equal" if rows else "none"
        out.append(f"| [{family.name}](#{key}) | {commit} | " + " | ".join(cells)
                   + f" | {published} | {len(flagged)} of {len(names)} |")
        sections += _ledger_section(key, family, record, names, marked, rows, pages, page)
    return "\n".join(out + ["", "*same*: identical to the authors' code, as said below; *—*: not identical "
                             "(a departure below) or not checked (said below).", ""] + sections) + "\n"


def _source_cell(record: Any) -> str:
    if not record.repository:
        return "the paper (no code)"
    return f"`{record.repository}`" + (f" @ `{record.commit[:7]}`" if record.commit else " (commit not recorded)")


def _which(tasks: list[str], names: list[str]) -> str:
    if len(tasks) == len(names):
        return "every task"
    return f"{len(tasks)} task(s): " + ", ".join(f"`{t}`" for t in tasks[:6]) + (" ..." if len(tasks) > 6 else "")


def _ledger_section(key: str, family: Any, record: Any, names: list[str], marked: dict[str, str | None],
                    rows: int | None, pages: set[str], page: str) -> list[str]:
    bench_page = family.page or BENCHMARK_PAGES.get(key, f"tasks/{key}.md")
    out = [f"## {family.name} {{#{key}}}", ""]
    if record.repository:
        head = f"Checked against `{record.repository}`" + (f" at commit `{record.commit}`" if record.commit
                                                            else " (the commit compared was not recorded)")
    else:
        head = f"Checked against the paper ({_cell(record.paper or '')}; no code was published)"
    if record.files:
        head += " (" + ", ".join(f"`{f}`" for f in record.files) + ")"
    if bench_page in pages:
        head += f"; how to run it: [{family.name}]({_rel(page, bench_page)})"
    out += [head + ".", "", "**Identical**", ""]
    out += [f"- *{a}*: {_cell(record.identical[a])}" if a in record.identical
            else f"- *{a}*: not identical or not checked (below, and the family's page)" for a in ASPECTS]
    published = _cell(record.published)
    if rows:
        published += (f" In the test suite: {rows} of them re-scored item for item, every one equal to the authors' "
                      f"score (`tests/data/{key}/published.json`).")
    out += ["", f"**Published answers**: {published}", ""]
    if record.unverified:
        out += [f"**Not verified**: {_cell(record.unverified)}", ""]
    departures = list(record.departures)
    own: dict[str, list[str]] = {}
    for name in names:
        why = marked[name] or ""
        for d in record.departures_of(name):
            why = why.replace(d.sentence(), "").strip()
        if why:
            own.setdefault(why, []).append(name)
    if departures or own:
        out += ["**Departures** (each marks the tasks it concerns †)", ""]
        for d in departures:
            tasks = [n for n in names if d.concerns(n)]
            out.append(f"- {_cell(d.what.rstrip('.'))}. *Effect*: {_cell(d.effect.rstrip('.'))} ({_which(tasks, names)}).")
        for why, tasks in own.items():
            out.append(f"- {_cell(why)} ({_which(tasks, names)}; the spec's own `report.differs_from_paper`)")
    else:
        out.append("**Departures declared in the specs**: none. The family's page says where lceval's other "
                   "choices (chat template, prompts that do not fit) may still matter for a model.")
    return out + [""]


# ---------------------------------------------------------------- harnesses side by side
def harness_table(plugins: Any, pages: set[str], page: str) -> str:
    """docs/_data/harnesses.yaml's rows with lceval's column filled from the catalog: a
    family lceval runs says so with its task count and languages, one it lacks says why (the
    row's `lceval_note`). A catalog family without a row fails the build, so a new family
    cannot go missing from the comparison."""
    import yaml
    from lceval.engine import load_catalog

    data = yaml.safe_load(HARNESSES.read_text(encoding="utf-8"))
    harnesses, rows = data["harnesses"], data["families"]
    catalog = load_catalog(plugins)
    specs = _builtin_specs(plugins, catalog)
    ours = {key: [n for n in names if n in specs] for key, names in catalog.by_family().items()}
    ours = {key: names for key, names in ours.items() if names}
    missing = sorted(set(ours) - set(rows))
    if missing:
        raise ValueError(f"{HARNESSES}: no row for the famil(ies) {', '.join(missing)} of the catalog")
    head = ["family", "lceval"] + [h["name"] for h in harnesses.values()]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    counts = {"lceval": 0, **{key: 0 for key in harnesses}}
    for key, row in rows.items():
        name = row["name"]
        if key in ours:
            family = catalog.family(key)
            target = family.page or BENCHMARK_PAGES.get(key, f"tasks/{key}.md")
            name = f"[{name}]({_rel(page, target)})" if target in pages else name
            languages = sorted({lang for n in ours[key] for lang in catalog.spec(n).languages})
            lceval = f"yes: {len(ours[key])} task(s), {', '.join(languages)}"
            counts["lceval"] += 1
        else:
            lceval = "no" + (f": {row['lceval_note']}" if row.get("lceval_note") else "")
        cells = [name, lceval]
        for hkey in harnesses:
            cell = str(row[hkey])
            counts[hkey] += cell.startswith("yes")
            cells.append(_cell(cell))
        out.append("| " + " | ".join(cells) + " |")
    total = ["**families run**", f"**{counts['lceval']}**"] + [f"**{counts[k]}**" for k in harnesses]
    out.append("| " + " | ".join(total) + " |")
    versions = "; ".join(f"[{h['name']}]({h['url']}) at {h['version']}" for h in harnesses.values())
    return "\n".join(out) + f"\n\nRead at: {versions}; lceval as this site was built.\n"
