"""The engine: from a `RunConfig` to the samples of a run, and the plugin host behind it
(public API: what the layers above and plugins use).

- A run: `Session` is the one door to a run, started (`Session(config)`) or reopened from a
  finished run (`Session.reopen(run, judge=...)`): it owns the request cache, the model and
  the judge model, and has the verbs every command needs (`plan`, `answer`, `judge`, `score`,
  `write`; `run` for all of them). `RunConfig` holds every `lceval run` option, declared once
  with its flag (`run_flags`), and reads and writes its manifest form itself; a finished run's
  `RunState` and its `TaskRun`s are what the results layer scores and writes (`RunOutputs`).
- Plugins and the catalog: `load_plugins` -> `Plugins` (`PluginInfo` per plugin),
  `load_catalog` -> `Catalog` (task specs, suites, model aliases, judge presets);
  `Plugins.current().open_method(...)` builds a long-context method (`press=NAME`) for a
  backend (lceval.methods).
- Task specs: `TaskSpec` with its typed sections (`ReportSettings` among them) and its
  manifest form, `load_spec`, `check_spec`; a spec folder's family file (`family_file`: the
  `defaults` `load_spec` merges under each spec of the folder, and its fidelity record against
  the authors' code, whose departures `load_spec` adds to the tasks' `report.differs_from_paper`);
  `TaskSpec.sources()` says where each resolved value came from (`lceval tasks show`).
- Models: `ModelSpec` (a model string parsed by the one parser), `ModelSpec.ENGINE_OPTIONS` (the
  model options every backend takes, which the engine reads: thinking markers, batches, cost limits),
  `model_label` (how a table
  names a model), `open_model` (a model through the request cache, for a plugin's command),
  `Cache` and `CachedModel` (the request cache and a backend seen through it).
- Data a task needs on disk: `Session.data(plugins)` (`lceval data status / fetch / pack /
  unpack`, and `validate`'s "data not installed"), built on each task type's `needs`.
- What reports and merges share: `tokens_label`, `removed_span` (a context cut), `assign` and
  `plan_fingerprint` (how a run's contexts are shared among its `--shard`s).
"""

from lceval.engine._cache import Cache
from lceval.engine._cached_model import CachedModel
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._family import family_file
from lceval.engine._context_policy import removed_span, tokens_label
from lceval.engine._model_spec import ModelSpec, model_label
from lceval.engine._plan import check_spec
from lceval.engine._plugin_host import PluginInfo, Plugins, load_plugins
from lceval.engine._run_config import RunConfig, run_flags
from lceval.engine._runner import RunState, TaskRun
from lceval.engine._selection import assign, plan_fingerprint
from lceval.engine._session import RunOutputs, Session, open_model
from lceval.engine._spec import ReportSettings, TaskSpec, load_spec

__all__ = [
    "Cache", "CachedModel", "Catalog", "ModelSpec", "PluginInfo", "Plugins", "ReportSettings", "RunConfig",
    "RunOutputs", "RunState", "Session", "TaskRun", "TaskSpec",
    "assign", "check_spec", "family_file", "load_catalog", "load_plugins", "load_spec", "model_label", "open_model",
    "plan_fingerprint", "removed_span", "run_flags", "tokens_label",
]
