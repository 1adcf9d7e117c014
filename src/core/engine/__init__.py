"""The engine: from a `RunConfig` to the samples of a run, and the plugin host behind it
(public API; what the CLI and the later stages call, and what a program driving lceval
calls too).

- Plugins and the catalog: `load_plugins` (entry points, all-or-nothing registration,
  clashes), `load_catalog` (task specs, suites, model aliases, judge presets).
- A run: `RunConfig` (every `lceval run` option, declared once with its flag: `run_flags`),
  `plan_run` (everything checked before any model loads: specs, overrides, models, judge),
  `execute` (one model's run) -> `RunState`, which `lceval.results.write_run` writes;
  `dry_run` shows the prompts instead.
- Models: `resolve_model` (a spec string parsed and checked once into a `ModelSpec`),
  `open_backend`, `open_model` (a model through the request cache, for plugin commands), and
  the cache itself (`Cache`, `CachedModel`, `default_cache_path`).
- Task specs: `TaskSpec` with its typed sections, `load_spec`, `check_options`.
- Context policy and selection helpers the reports share: `POLICIES`,
  `parse_context_lengths`, `tokens_label`, `removed_span`, `parse_contexts`, `parse_shard`.
"""

from lceval.engine._cache import Cache, cache_failures, default_cache_path
from lceval.engine._cached_model import CachedModel, UsageCounters, messages_payload, request_key
from lceval.engine._catalog import Catalog, ModelAlias, load_catalog
from lceval.engine._context_policy import POLICIES, parse_context_lengths, removed_span, tokens_label
from lceval.engine._dry_run import dry_run
from lceval.engine._model_spec import (ModelHandle, ModelSpec, open_backend, open_judge_model, open_model, parse_model_spec,
                                       resolve_judge_model, resolve_model)
from lceval.engine._plan import (FileRecorder, RunPlan, checked_task_type, load_task, load_work, make_judge,
                                 parse_judge_flag, plan_run, resolve_judge_flag)
from lceval.engine._plugin_host import (BUILTIN_DISTRIBUTION, IN_PROCESS, KINDS, Clash, PluginInfo, Plugins,
                                        Registration, describe_kind, load_plugins)
from lceval.engine._run_config import Flag, RunConfig, flag_of, run_flags
from lceval.engine._runner import RunState, TaskRun, execute, generate_task, judge_task
from lceval.engine._selection import assign, parse_contexts, parse_shard, plan_fingerprint
from lceval.engine._spec import ContextSettings, JudgeChoice, TaskSpec, check_options, check_references, load_spec

__all__ = [
    "BUILTIN_DISTRIBUTION", "IN_PROCESS", "KINDS", "POLICIES",
    "Cache", "CachedModel", "Catalog", "Clash", "ContextSettings", "FileRecorder", "Flag", "JudgeChoice",
    "ModelAlias", "ModelHandle", "ModelSpec", "PluginInfo", "Plugins", "Registration", "RunConfig", "RunPlan", "RunState", "TaskRun",
    "TaskSpec", "UsageCounters",
    "assign", "cache_failures", "check_options", "checked_task_type", "check_references", "default_cache_path", "describe_kind", "dry_run",
    "execute", "flag_of", "generate_task", "judge_task", "load_catalog", "load_plugins", "load_spec", "load_task",
    "load_work", "make_judge", "messages_payload", "open_backend", "open_judge_model", "open_model",
    "parse_context_lengths", "parse_contexts", "parse_judge_flag", "parse_model_spec", "parse_shard",
    "plan_fingerprint", "plan_run", "removed_span", "request_key", "resolve_judge_flag", "resolve_judge_model",
    "resolve_model", "run_flags", "tokens_label",
]
