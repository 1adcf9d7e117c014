"""`lceval run`'s options, declared once.

Each field of `RunConfig` that a user sets on the command line carries its `Flag`
(`lceval.options`, the one flag mechanism, which `lceval launch`'s settings use too): the
spelling, the help text, and how the text becomes the field's value. The CLI builds the `run`
parser from these declarations (`flags_of(RunConfig)`), turns the parsed text into a
`RunConfig` with `RunConfig.from_flags`, and `--dry-run` reads the same object, so adding an
option is one field here. Every conversion raises a `UserError` naming the flag, so a bad
value is one line and exit 2, never argparse's usage block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lceval.engine._context_policy import POLICIES
from lceval.engine._selection import parse_contexts, parse_shard
from lceval.engine._spending import parse_usd
from lceval.errors import UserError
from lceval.io import loads_yaml_with_lines
from lceval.options import FlagSettings, flag, flags_of, whole_number
from lceval.tokens import parse_lengths


def _flag(*names: str, help: str, local: bool = False, **kind: Any) -> Any:
    """A field set by a flag; `local`: where this machine keeps things or how it shows them,
    not a setting of the run (left out of the manifest, so a run reopened elsewhere is the
    same run)."""
    return flag(*names, help=help, metadata={"local": local}, **kind)


def parse_seeds(text: str) -> list[int]:
    """`--seed 2023,2024,2025` -> [2023, 2024, 2025]."""
    try:
        seeds = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise UserError(f"seeds must be integers, got '{text}'", field="--seed") from None
    if not seeds:
        raise UserError("at least one seed is needed", field="--seed")
    return seeds


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`--set FIELD=VALUE` with VALUE read by the spec loader (no tags, bounded aliases and
    nesting); an empty VALUE is null, as in a YAML file."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set takes FIELD=VALUE, got '{item}'", field="--set")
        try:
            out[key.strip()] = loads_yaml_with_lines(value, "--set")[0] if value.strip() else None
        except UserError as exc:
            raise UserError(f"value of '{key}' is not a plain YAML value ({exc.message}): {value[:80]!r}",
                            field="--set") from None
    return out


def _policy(text: str) -> str:
    if text not in POLICIES:
        raise UserError(f"unknown context policy '{text}' (known: {', '.join(POLICIES)})", field="--context-policy")
    return text


def _negated(given: bool) -> bool:
    return not given


def _score(text: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise UserError(f"--effective-threshold takes a score (e.g. 85.6), got '{text}'",
                        field="--effective-threshold") from None
    if not math.isfinite(value):
        raise UserError(f"--effective-threshold takes a finite score, got '{text}'", field="--effective-threshold")
    return value


def _thinking(text: str) -> bool:
    word = str(text).strip().lower()
    if word not in ("on", "off"):
        raise UserError(f"--thinking takes on or off, got '{text}'", field="--thinking")
    return word == "on"


def _effort(text: str) -> str:
    word = str(text).strip().lower()
    if word not in EFFORTS:
        raise UserError(f"--reasoning-effort takes {', '.join(EFFORTS)}, got '{text}'", field="--reasoning-effort")
    return word


EFFORTS = ("low", "medium", "high")


def parse_press_sweep(text: str) -> str:
    """`--press-sweep NAME:R1,R2,...` checked (ratios in [0, 1), each once) and written in one
    spelling (`snapkv:0,0.25,0.5`), as the manifest records it."""
    name, sep, ratios = str(text).partition(":")
    values = []
    for part in ratios.split(","):
        try:
            values.append(float(part))
        except ValueError:
            raise UserError(f"--press-sweep takes NAME:R1,R2,... with ratios as numbers, got '{text}'",
                            field="--press-sweep") from None
    if not sep or not name.strip() or not values:
        raise UserError(f"--press-sweep takes NAME:R1,R2,..., e.g. snapkv:0,0.25,0.5,0.75, got '{text}'",
                        field="--press-sweep")
    bad = [v for v in values if not 0 <= v < 1]
    if bad:
        raise UserError(f"--press-sweep: compression ratio {bad[0]:g} is outside [0, 1)", field="--press-sweep")
    if len(set(values)) != len(values):
        raise UserError(f"--press-sweep: a ratio is given twice in '{text}'", field="--press-sweep")
    return f"{name.strip()}:{','.join(f'{v:g}' for v in sorted(values))}"


def check_sweep_models(models: list[str], sweep: str | None, *, own_runs: bool) -> None:
    """A model that names a press beside `--press-sweep` is refused, naming both: the sweep
    would otherwise be ignored for it without a word. `own_runs`: a model that is one of the
    sweep's own runs (its press and one of its ratios: a run of the sweep reopened from its
    manifest) is accepted; the command line accepts none."""
    from lceval.methods import METHOD_OPTION, RATIO_OPTION
    from lceval.options import split_options

    if not sweep:
        return
    name, _, ratios = sweep.partition(":")
    for model in models:
        try:
            options = split_options(model, "--model")[1]
        except UserError:
            continue  # a malformed model string is said by the model's own check
        if METHOD_OPTION not in options:
            continue
        try:
            ratio: float | None = float(options.get(RATIO_OPTION, "nan"))
        except ValueError:
            ratio = None
        if own_runs and options[METHOD_OPTION] == name and ratio in [float(r) for r in ratios.split(",")]:
            continue
        raise UserError(f"--press-sweep {sweep} runs each model at each of its ratios, but --model '{model}' already "
                        f"names a press ({METHOD_OPTION}={options[METHOD_OPTION]})", field="--press-sweep",
                        hint=f"Give the model without {METHOD_OPTION}= and {RATIO_OPTION}= to sweep it, or drop "
                             "--press-sweep to run that one setting.")


def press_sweep_models(models: list[str], sweep: str | None) -> list[str]:
    """Each model once per ratio of the sweep, with `press=NAME,compression_ratio=R` added
    (lceval.methods' option names); a model that already names a press (a run of the sweep
    reopened from its manifest: `check_sweep_models` refuses any other) is kept as it is."""
    from lceval.methods import METHOD_OPTION, RATIO_OPTION

    if not sweep:
        return list(models)
    name, _, ratios = sweep.partition(":")
    out = []
    for model in models:
        if f",{METHOD_OPTION}=" in model:
            out.append(model)
            continue
        out += [f"{model},{METHOD_OPTION}={name},{RATIO_OPTION}={r}" for r in ratios.split(",")]
    return out


@dataclass
class RunConfig(FlagSettings):
    """What one `lceval run` asks: every flag's value, typed. One run per model in `models`."""

    tasks: str = _flag("--tasks", required=True, help="task names, suite names or YAML paths, comma-separated")
    models: list[str] = _flag("--model", repeat=True, required=True, default_factory=list,
                              help="SCHEME:MODEL[,key=value...] or an alias (repeat for several models)")
    judge: str | None = _flag("--judge", help="judge name or preset (default: the spec's)")
    judge_model: str | None = _flag("--judge-model", help="model spec the judge calls, if it needs one")
    splits: list[str] | None = _flag("--split", repeat=True, help="dataset split (repeatable; default: the spec's)")
    limit: int | None = _flag("--limit", metavar="N", parse=whole_number("--limit"),
                              help="at most N scored items per split (the first ones, in the dataset's order)")
    limit_per_context: int | None = _flag(
        "--limit-per-context", metavar="K", parse=whole_number("--limit-per-context"),
        help="at most K items about each long context (meeting, document, haystack): ELITR-Bench spreads them over "
             "the meeting, other tasks take the first K; with --limit N, N/K contexts per split, e.g. --limit 9 "
             "--limit-per-context 3")
    seeds: list[int] = _flag("--seed", metavar="SEED[,SEED...]", parse=parse_seeds, default_factory=lambda: [0],
                             help="seed or comma-separated seeds (mean ± std across them; default 0)")
    output: Path = _flag("--output", parse=Path, default=Path("runs"),
                         local=True, help="folder for run directories (default: ./runs)")
    context_policy: str | None = _flag("--context-policy", metavar="{" + ",".join(POLICIES) + "}", parse=_policy,
                                       help="what to do with a context longer than the model's window "
                                            "(default: the spec's)")
    context_lengths: list[int | None] | None = _flag(
        "--context-lengths", metavar="8k,128k,1m,...,full", parse=parse_lengths,
        help="run each task with its context cut to each budget (k = 1024 tokens, m = 1024k; 1.5m, 8k..1m "
             "doubling, full = uncut): a curve of score against context length; a length past the model's "
             "window is skipped")
    effective_threshold: float | None = _flag(
        "--effective-threshold", metavar="SCORE", parse=_score,
        help="the score a length must reach for the effective length (RULER's: the longest length such that it and "
             "every shorter one score at least this), over a --context-lengths sweep and a spec's report.length_bins "
             "(default: the spec's)")
    thinking: bool | None = _flag(
        "--thinking", metavar="{on,off}", parse=_thinking,
        help="a reasoning model's thinking on or off, where its chat template or API has a switch (Qwen3's "
             "enable_thinking, Anthropic's extended thinking; default: the model's own)")
    reasoning_budget: int | None = _flag(
        "--reasoning-budget", metavar="TOKENS", parse=whole_number("--reasoning-budget"),
        help="tokens a reasoning model may think before it must answer, apart from the answer's max_new_tokens "
             "(default: the model family's guidance, printed); an API gets it as its thinking budget")
    reasoning_effort: str | None = _flag(
        "--reasoning-effort", metavar="{" + ",".join(EFFORTS) + "}", parse=_effort,
        help="an API reasoning model's effort (OpenAI's reasoning_effort, gpt-oss)")
    batch: bool = _flag(
        "--batch", switch=True, default=False,
        help="send the requests of every model of the run that has a batch API (OpenAI's /v1/batches, Anthropic's "
             "Message Batches: litellm: models) through it, at half the price, answered within hours; a rerun "
             "adopts the batches still running (a model's own batch=true/false wins)")
    max_cost: float | None = _flag(
        "--max-cost", metavar="USD", parse=parse_usd,
        help="stop sending requests once what this command spent plus the most its requests in flight may cost "
             "would pass USD: what was answered is written as a partial run and the command exits 3 (run it again "
             "to go on; nothing paid is paid again)")
    press_sweep: str | None = _flag(
        "--press-sweep", metavar="NAME:R1,R2,...", parse=parse_press_sweep,
        help="run each model once per compression ratio of the KV-cache press NAME (a model setting, "
             "press=NAME,compression_ratio=R, of backends that take one: hf), on the same items; ratio 0 is the "
             "uncompressed run the others are tested against, and `lceval report` draws score, KV memory and "
             "time against the ratio")
    retriever: str | None = _flag("--retriever", help="retriever plugin for tasks that retrieve "
                                                      "(sets options.retriever)")
    overrides: dict[str, Any] = _flag("--set", repeat=True, metavar="FIELD=VALUE", parse=parse_overrides,
                                      default_factory=dict,
                                      help="override a spec field, e.g. --set options.history=gold (YAML value)")
    cache_path: Path | None = _flag("--cache", parse=Path,
                                    local=True, help="cache database (default: $LCEVAL_CACHE or the user cache dir)")
    data_home: Path | None = _flag("--data-home", parse=Path,
                                   local=True, help="data home (default: $LCEVAL_DATA or the user cache dir)")
    progress: bool = _flag("--no-progress", switch=True, parse=_negated, default=True, local=True, help="no progress bar")
    contexts: list[str] | None = _flag(
        "--contexts", repeat=True, metavar="ID,...", parse=parse_contexts,
        help="only these contexts (meetings, haystacks): ids or globs, e.g. dev/meeting_en_dev_001, 'test2/*'; "
             "an id also matches its leading or trailing '/'-separated parts")
    shard: tuple[int, int] | None = _flag(
        "--shard", metavar="I/N", parse=parse_shard,
        help="run share I of N (0-based, e.g. $SLURM_ARRAY_TASK_ID/4); join with `lceval merge`")
    dry_run: bool = _flag("--dry-run", switch=True, default=False,
                          local=True, help="print the exact prompts of the selected items (context policy applied when the "
                               "model's tokenizer can be loaded) and stop: no answer generated, nothing written")
    # set by the command line around `run`, not by a run flag
    disabled_plugins: list[str] = field(default_factory=list)  # -p no:NAME
    #: the command line; the manifest records it beside the config, not in it
    command: list[str] = field(default_factory=list, metadata={"local": True})

    def check(self) -> None:
        """What no single flag can say wrong (a config built by code is checked too)."""
        if not self.models:
            raise UserError("at least one model is needed", field="--model")
        if not self.seeds:
            raise UserError("at least one seed is needed", field="--seed")
        for name in ("limit", "limit_per_context"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{flag_of(name)} must be at least 1, got {value}", field=flag_of(name))
        if self.shard is not None and not 0 <= self.shard[0] < self.shard[1]:
            raise UserError(f"--shard takes I/N with 0 <= I < N, got {self.shard[0]}/{self.shard[1]}",
                            field="--shard")
        if self.context_policy is not None:
            _policy(self.context_policy)
        if self.max_cost is not None:
            parse_usd(self.max_cost)
        if self.press_sweep is not None:
            parse_press_sweep(self.press_sweep)
            check_sweep_models(self.models, self.press_sweep, own_runs=True)

    @classmethod
    def from_flags(cls, given: Any, **extra: Any) -> "RunConfig":
        """FlagSettings' `from_flags`; on the command line no model may name a press beside
        `--press-sweep` (a config reopened from a sweep's run holds its press and ratio)."""
        config: RunConfig = super().from_flags(given, **extra)
        check_sweep_models(config.models, config.press_sweep, own_runs=False)
        return config

    def run_models(self) -> list[str]:
        """The model strings the run answers with: `models`, each once per ratio of `--press-sweep`."""
        return press_sweep_models(self.models, self.press_sweep)


    # -- the manifest form: written and read here only -------------------------------------
    def to_manifest(self) -> dict[str, Any]:
        """manifest.json's `config`: every setting of the run (not where this machine keeps
        its files), JSON-typed; `models` is recorded as `model`, since a run folder holds one
        model's run."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.metadata.get("local"):
                continue
            value = getattr(self, f.name)
            if f.name == "models":
                out["model"] = value[0] if len(value) == 1 else list(value)
            else:
                out[f.name] = _to_json(value)
        return out

    @classmethod
    def from_manifest(cls, data: dict[str, Any], **changes: Any) -> "RunConfig":
        """The config a finished run recorded (`to_manifest`'s form), with `changes`. A key
        this lceval does not know (written by a newer one) is left aside; a setting the
        manifest lacks (written by an older one) keeps its default."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.metadata.get("local"):
                continue
            key = "model" if f.name == "models" else f.name
            if key not in data:
                continue
            value = data[key]
            if f.name == "models":
                value = [str(value)] if isinstance(value, str) else [str(v) for v in value or []]
            elif f.name == "shard":
                value = (int(value[0]), int(value[1])) if value else None
            elif f.name == "overrides":
                value = dict(value or {})
            elif f.name in ("seeds", "disabled_plugins"):
                value = list(value or [])
            values[f.name] = value
        values.update(progress=False)
        values.update(changes)
        return cls(**values)


def _to_json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def flag_of(name: str) -> str:
    """How the command line spells the RunConfig field `name` ("limit" -> "--limit")."""
    return dict(flags_of(RunConfig))[name].name
