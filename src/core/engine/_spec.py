"""Task specs: load a YAML file safely, check it against the shipped JSON Schema and the task
type's options schema, and fill defaults. Every error names file, field and line."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lceval.engine._context_policy import CUT_MARK, CutStyle
from lceval.engine._family import with_family
from lceval.engine._length_bins import LengthBins
from lceval.engine._spec_layers import SpecLayer, layer_of, leaf_paths, merge_specs
from lceval.errors import UserError
from lceval.io import load_schema, unknown_name, validate
from lceval.io import PathKey, line_of, load_yaml_with_lines
from lceval.options import defaults
from lceval.tokens import tokens_label
from lceval.types import GenerationParams

if TYPE_CHECKING:
    from lceval.engine._plugin_host import Plugins

DEFAULTS: dict[str, Any] = {
    "options": {},
    "generation": {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0,
                   "repeat_penalty": 1.0, "stop": []},
    "context": {"policy": "error"},
    "judge": {"name": "lexical", "options": {}},
    "report": {"breakdowns": [], "tests": []},
}


@dataclass(frozen=True)
class ContextSettings:
    """The spec's `context:` section: how a long context is fitted to the model's window."""

    policy: str
    #: tokens kept for each answer; None = the spec's generation.max_new_tokens
    answer_reserve: int | None
    #: one budget of `--context-lengths`: the context is cut to at most this many tokens
    max_tokens: int | None
    #: how a cut is made: its marker, centred on the prompt (the authors' rule) or the context,
    #: and the authors' prompt length
    style: CutStyle = CutStyle()

    def reserve(self, max_new_tokens: int) -> int:
        return int(self.answer_reserve if self.answer_reserve is not None else max_new_tokens)


@dataclass(frozen=True)
class JudgeChoice:
    """The spec's `judge:` section, or the `--judge` flag with its options."""

    name: str
    options: dict[str, Any]


@dataclass(frozen=True)
class MetricChoice:
    """One further metric of a spec's `metrics:` (the headline is the judge): a judge run on
    the same answers, reported under `label`."""

    label: str
    name: str
    options: dict[str, Any]


@dataclass(frozen=True)
class WelchTest:
    """One test of the spec's `report.tests`: are the scores of the samples whose `field` is
    `value` lower (`alternative: less`) or higher than the others'? (ELITR-Bench's lost in the
    middle, Thonet et al., 2024, Table 9: answers in the middle of the meeting against the rest.)"""

    name: str
    kind: str
    field: str
    value: str | int | float
    alternative: str = "less"
    description: str = ""


@dataclass(frozen=True)
class ReportSettings:
    """The spec's `report:` section, typed: how samples become the numbers of results.json
    (groups, the resampling unit, breakdowns, tests, further metrics) and where `lceval report`
    puts the task. Scoring reads this, never the raw mapping."""

    #: a metadata field reported group by group and as the mean of the groups (e.g. split)
    group_by: str | None = None
    #: the metadata field whose values an interval resamples together (e.g. meeting_id)
    cluster_by: str | None = None
    breakdowns: tuple[str, ...] = ()
    #: per breakdown field, the values in the order to report them (others follow, sorted)
    breakdown_order: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    effective_length_threshold: float | None = None
    #: token edges of the `context_tokens` breakdown (None: the usual window sizes)
    context_buckets: tuple[int, ...] | None = None
    #: the shared table of `lceval report` this task is a column group of ({name, column, order})
    table: dict[str, Any] = field(default_factory=dict)
    #: further numbers from the judgments' details, reported beside `score`
    metrics: tuple[str, ...] = ()
    tests: tuple[WelchTest, ...] = ()
    #: why the task's number is not comparable with the paper's (a departure kept on purpose)
    differs_from_paper: str | None = None
    #: where each sample falls on the length axis (`report.length_bins`): the score by length bin
    length_bins: LengthBins | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any] | None) -> "ReportSettings":
        data = data or {}
        return cls(group_by=data.get("group_by"), cluster_by=data.get("cluster_by"),
                   breakdowns=tuple(data.get("breakdowns") or ()),
                   breakdown_order={k: tuple(v) for k, v in (data.get("breakdown_order") or {}).items()},
                   effective_length_threshold=data.get("effective_length_threshold"),
                   context_buckets=tuple(data["context_buckets"]) if data.get("context_buckets") else None,
                   table=dict(data.get("table") or {}), metrics=tuple(data.get("metrics") or ()),
                   tests=tuple(WelchTest(**t) for t in data.get("tests") or ()),
                   differs_from_paper=data.get("differs_from_paper"),
                   length_bins=LengthBins.from_data(data.get("length_bins")))


@dataclass
class TaskSpec:
    """A checked task spec. `data` is the resolved mapping (defaults filled once, here, and
    the task type's option defaults by `check_options`): what `lceval tasks show` prints and
    the manifest records. The engine reads it through the typed sections below, never by
    indexing `data`; the manifest form is `to_manifest` / `from_manifest`, so a finished
    run's spec is read back by the same code that wrote it."""

    name: str
    path: Path
    data: dict[str, Any]  # validated, defaults filled
    lines: dict[PathKey, int]
    #: what the spec was resolved from, in order (lceval's defaults, the folder, the family's
    #: defaults, the spec file ...): where each value came from, and which file an error names
    layers: tuple[SpecLayer, ...] = ()

    @property
    def type(self) -> str:
        return self.data["type"]

    @property
    def description(self) -> str:
        return self.data["description"]

    @property
    def dataset(self) -> str | None:
        return self.data.get("dataset")

    @property
    def splits(self) -> list[str] | None:
        return self.data.get("splits")

    @property
    def options(self) -> dict[str, Any]:
        """The task type's options (checked against its schema, its defaults filled)."""
        return self.data["options"]

    @property
    def context(self) -> ContextSettings:
        c = self.data["context"]
        style = CutStyle(marker=c.get("marker", CUT_MARK), prompt=c.get("cut") == "prompt",
                         max_prompt_tokens=c.get("max_prompt_tokens"))
        return ContextSettings(policy=c["policy"], answer_reserve=c.get("answer_reserve"),
                               max_tokens=c.get("max_tokens"), style=style)

    @property
    def judge(self) -> JudgeChoice:
        return JudgeChoice(name=self.data["judge"]["name"], options=dict(self.data["judge"].get("options") or {}))

    @property
    def metrics(self) -> list[MetricChoice]:
        """The further metrics, after the headline (the judge): `metrics:` less its headline."""
        return [MetricChoice(label=m.get("label") or m["name"], name=m["name"], options=dict(m.get("options") or {}))
                for m in self.data.get("metrics") or [] if not m.get("headline")]

    @property
    def headline_label(self) -> str:
        """What the task's score is called: the headline metric's label, else the judge's name."""
        for m in self.data.get("metrics") or []:
            if m.get("headline"):
                return str(m.get("label") or m["name"])
        return str(self.data["judge"].get("label") or self.data["judge"]["name"])

    @property
    def rank(self) -> dict[str, Any]:
        return dict(self.data.get("rank") or {})

    @property
    def citation(self) -> str | None:
        return self.data.get("citation")

    @property
    def family(self) -> str:
        """The benchmark family (the spec's `family`, else its folder: tasks/<family>/x.yaml)."""
        return str(self.data.get("family") or self.path.parent.name)

    @property
    def languages(self) -> list[str]:
        value = self.data.get("language") or "en"
        return [value] if isinstance(value, str) else list(value)

    @property
    def report(self) -> ReportSettings:
        return ReportSettings.from_data(self.data.get("report"))

    def with_metric(self, label: str, name: str, options: dict[str, Any]) -> "TaskSpec":
        """A copy with one more metric (`lceval score --add-metric`); the judge, made the
        listed headline when the spec listed none, keeps its place."""
        data = copy.deepcopy(self.data)
        metrics = data.get("metrics") or [{"name": self.judge.name, "options": dict(self.judge.options),
                                           "headline": True, **({"label": self.headline_label}
                                                                if self.headline_label != self.judge.name else {})}]
        metrics.append({"name": name, "options": dict(options), **({"label": label} if label != name else {})})
        data["metrics"] = metrics
        return TaskSpec(name=self.name, path=self.path, data=data, lines=self.lines)

    def with_breakdowns(self, more: list[str]) -> "TaskSpec":
        """A copy whose report breaks the scores down by further fields (`lceval report --by`)."""
        data = copy.deepcopy(self.data)
        section = data.setdefault("report", {})
        section["breakdowns"] = list(dict.fromkeys([*(section.get("breakdowns") or []), *more]))
        return TaskSpec(name=self.name, path=self.path, data=data, lines=self.lines)

    # -- the manifest form ------------------------------------------------------------------
    def with_set(self, dotted: dict[str, Any]) -> "TaskSpec":
        """This spec with `--set FIELD=VALUE` overrides (dotted field names) merged in and
        checked, as a run merges its --set flags: for a program that builds a task as a run does."""
        return with_overrides(self, nest_dotted(dotted))

    def to_manifest(self) -> dict[str, Any]:
        """What manifest.json records of this spec (`resolved.tasks.NAME`): its file and the
        resolved mapping, from which `from_manifest` rebuilds it."""
        return {"spec_path": str(self.path), "spec": self.data}

    @classmethod
    def from_manifest(cls, name: str, entry: dict[str, Any], where: Path) -> "TaskSpec":
        """The spec a finished run recorded as `entry` (`to_manifest`'s form); `where` (the run
        folder) stands in for a spec file the manifest does not name. No line numbers: it is
        JSON, and the run checked the spec when it started."""
        data = entry.get("spec")
        if not isinstance(data, dict):
            raise UserError(f"the manifest has no resolved spec for task '{name}'", file=where / "manifest.json",
                            field=f"resolved.tasks.{name}.spec")
        # A manifest is read back, not trusted: a field edited by hand (or by an older lceval)
        # gets the same check as a spec file, blamed on the manifest, and a section it lacks the
        # defaults a spec without it would have.
        validate(data, load_schema("task_spec.schema.json"), where / "manifest.json", {},
                 prefix=("resolved", "tasks", name, "spec"))
        return cls(name=name, path=Path(entry.get("spec_path") or where), data=_merge(DEFAULTS, data), lines={})

    @property
    def max_new_tokens(self) -> int:
        return int(self.data["generation"]["max_new_tokens"])

    def generation_params(self, seed: int) -> GenerationParams:
        g = self.data["generation"]
        return GenerationParams(
            max_new_tokens=int(g["max_new_tokens"]),
            temperature=float(g["temperature"]),
            top_p=float(g["top_p"]),
            repeat_penalty=float(g["repeat_penalty"]),
            seed=seed,
            stop=tuple(g.get("stop", [])),
            thinking=g.get("thinking"),
            reasoning_budget=int(g["reasoning_budget"]) if g.get("reasoning_budget") is not None else None,
            reasoning_effort=g.get("reasoning_effort"),
            reasoning_room=int(g["reasoning_room"]) if g.get("reasoning_room") is not None else None,
            min_new_tokens=int(g.get("min_new_tokens") or 0),
        )

    @property
    def reasoning_budget(self) -> int | None:
        """Tokens a reasoning model may think (the spec's, or the run's --reasoning-budget)."""
        value = self.data["generation"].get("reasoning_budget")
        return int(value) if value is not None else None

    def error(self, message: str, at: PathKey = ()) -> UserError:
        return self.blame(UserError(message, file=self.path, field=".".join(map(str, at)) or None,
                                    line=line_of(self.lines, at)))

    def placed(self, exc: UserError) -> UserError:
        """An error about the spec's field `exc.field` (a dotted path), given the file and line
        that field is written at."""
        at = tuple(int(p) if p.isdigit() else p for p in (exc.field or "").split(".") if p)
        return self.blame(exc.but(file=str(self.path), line=line_of(self.lines, at)))

    def blame(self, exc: UserError) -> UserError:
        """An error about one of the spec's values, naming the file that value is written in:
        a value the spec inherits from its family's defaults is fixed there."""
        if exc.file != str(self.path) or not exc.field:
            return exc
        at = tuple(int(p) if p.isdigit() else p for p in exc.field.split("."))
        layer = layer_of(self.layers, at)
        if layer is None or layer.file is None or layer.file == self.path or not layer.prefix:
            return exc
        return exc.but(file=str(layer.file), field=".".join(map(str, layer.prefix + at)),
                       line=line_of(layer.lines, layer.prefix + at))

    def sources(self) -> dict[PathKey, str]:
        """Where each value of the resolved spec came from (`lceval tasks show`): the layer
        that gave it, else the task type's option defaults. Empty for a spec read back from
        a manifest (it records the values, not their sources)."""
        if not self.layers:
            return {}
        out = {}
        for at in leaf_paths(self.data):
            layer = layer_of(self.layers, at, exact=True)
            out[at] = layer.describe() if layer is not None else f"the {self.type} task type's default"
        return out


_merge = merge_specs


def load_spec(path: Path) -> TaskSpec:
    """Parse and check the generic part of a spec; options are checked by `check_options`."""
    path = Path(path)
    raw, lines = load_yaml_with_lines(path)
    if not isinstance(raw, dict):
        raise UserError("a task spec must be a mapping of fields", file=path, line=1)
    raw, layers = with_family(raw, path, lines)
    headed = _headline(raw, path, lines)
    if "judge" not in raw and "judge" in headed:
        layers.append(SpecLayer("the headline metric", {"judge": headed["judge"]}))
    data = _merge(DEFAULTS, headed)
    spec = TaskSpec(name=data["name"], path=path, data=data, lines=lines,
                    layers=(SpecLayer("lceval's default", DEFAULTS), *layers))
    try:  # the typed report's own checks (which of length_bins' fields go together), at the spec's line
        spec.report
    except UserError as exc:
        raise spec.placed(exc) from None
    return spec


def _headline(raw: dict[str, Any], path: Path, lines: dict[PathKey, int]) -> dict[str, Any]:
    """A spec with `metrics:`: at most one is the headline, labels are distinct, and without
    `judge:` the headline metric (marked, else the first) is the judge; with `judge:` it is."""
    metrics = raw.get("metrics")
    if not metrics:
        return raw
    marked = [i for i, m in enumerate(metrics) if m.get("headline")]
    if len(marked) > 1:
        raise UserError("only one metric can be the headline", file=path, field=f"metrics.{marked[1]}.headline",
                        line=line_of(lines, ("metrics", marked[1], "headline")))
    labels = [m.get("label") or m["name"] for m in metrics]
    twice = next((lab for lab in labels if labels.count(lab) > 1), None)
    if twice is not None:
        i = len(labels) - 1 - labels[::-1].index(twice)
        raise UserError(f"two metrics are called '{twice}': give one a `label`", file=path, field=f"metrics.{i}",
                        line=line_of(lines, ("metrics", i)))
    if "judge" in raw:
        if marked:
            raise UserError("the spec has a judge, which is the headline: no metric can be marked headline too",
                            file=path, field=f"metrics.{marked[0]}.headline",
                            line=line_of(lines, ("metrics", marked[0], "headline")))
        return raw
    head = metrics[marked[0] if marked else 0]
    out = dict(raw)
    out["judge"] = {"name": head["name"], "options": dict(head.get("options") or {}),
                    **({"label": head["label"]} if head.get("label") else {})}
    out["metrics"] = [{**m, "headline": True} if m is head else {k: v for k, v in m.items() if k != "headline"}
                      for m in metrics]
    return out


def check_options(spec: TaskSpec, options_schema: dict[str, Any], plugins: "Plugins | None" = None) -> None:
    """Check the spec's `options` against its task type's schema and fill in the schema's
    declared defaults (in place), so the resolved spec - shown by `lceval tasks show` and
    recorded in the manifest - holds every option the task type will use. With `plugins`, an
    option naming a plugin (PLUGIN_KEYWORD) must name one that is installed."""
    try:
        validate(spec.options, options_schema, spec.path, spec.lines, prefix=("options",),
                 plugin_names=plugins.table if plugins is not None else None)
    except UserError as exc:
        raise spec.blame(exc) from None
    for key, value in defaults(options_schema).items():
        spec.options.setdefault(key, value)


def task_type_of(spec: TaskSpec, plugins: "Plugins") -> Any:
    """The task-type plugin the spec's `type:` names; an unknown one is reported at that line
    of the spec file."""
    if spec.type in plugins.task_types:
        return plugins.task_types[spec.type]
    failed = [f"{i.name} ({i.error.splitlines()[-1]})" for i in plugins.infos if i.error]
    raise UserError(unknown_name("task type", spec.type, sorted(plugins.task_types)), file=spec.path, field="type",
                    line=line_of(spec.lines, ("type",)),
                    hint=f"Plugins that failed to load: {', '.join(failed)}." if failed else None)


def check_references(spec: TaskSpec, plugins: "Plugins", judges: bool = True) -> Any:
    """Every plugin the spec names exists: its task type, its judge (`judges=False` when the
    command line picks the judge instead) and its rank judge; options are checked by
    `check_options`. Returns the task type."""
    task_type = task_type_of(spec, plugins)
    if judges:
        name = spec.judge.name
        if name not in plugins.judges:
            raise spec.error(unknown_name("judge", name, sorted(plugins.judges)), ("judge", "name"))
    for i, m in enumerate(spec.data.get("metrics") or []):
        if m["name"] not in plugins.judges:
            raise spec.error(unknown_name("judge", m["name"], sorted(plugins.judges)), ("metrics", i, "name"))
    rank_judge = spec.rank.get("judge")
    if isinstance(rank_judge, str):
        name = rank_judge.split(",", 1)[0].strip()
        if name not in plugins.pairwise_judges:
            raise spec.error(unknown_name("pairwise judge", name, sorted(plugins.pairwise_judges)), ("rank", "judge"))
    return task_type


def nest_dotted(dotted: dict[str, Any]) -> dict[str, Any]:
    """`{"options.essay": x}` -> `{"options": {"essay": x}}`: --set's field names as a spec's mapping."""
    nested: dict[str, Any] = {}
    for key, value in dotted.items():
        node = nested
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def with_overrides(spec: TaskSpec, overrides: dict[str, Any]) -> TaskSpec:
    """A copy of `spec` with run-time overrides (e.g. --context-policy) merged in and checked."""
    if not overrides:
        return spec
    data = _merge(spec.data, overrides)
    validate(data, load_schema("task_spec.schema.json"), spec.path, spec.lines)
    return TaskSpec(name=spec.name, path=spec.path, data=data, lines=spec.lines,
                    layers=(*spec.layers, SpecLayer("the command line", overrides)))


def context_length_variants(spec: TaskSpec, budgets: list[int | None] | None) -> list[TaskSpec]:
    """One copy of `spec` per budget, its context cut to at most that many tokens
    (`context.max_tokens`) and named `<task>@<budget>`, so each budget's samples, results,
    intervals and tests stay apart in one run directory; `None` keeps the task as it is.
    Prompts that a budget leaves uncut are the same requests as in the task itself, so the
    cache answers them once for every budget."""
    if not budgets:
        return [spec]
    out = []
    for budget in budgets:
        if budget is None:
            out.append(spec)
            continue
        variant = with_overrides(spec, {"context": {"max_tokens": budget}})
        variant.name = f"{spec.name}@{tokens_label(budget)}"
        out.append(variant)
    return out
