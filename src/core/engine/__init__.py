"""The engine: from a `RunConfig` to the samples of a run, and the plugin host behind it
(public API: what the layers above and plugins use).

- A run: `Session` is the one door to a run, started (`Session(config)`) or reopened from a
  finished run (`Session.reopen(run, judge=...)`), or holding only a cache or a judge model
  for a command that is no run: it owns the request cache, the model and the judge model, and
  has the verbs every command needs (`plan`, `answer`, `rejudge`, `add_metrics`, `judge`).
  `RunConfig` holds every `lceval run` option, declared once with its flag
  (`lceval.options.flag`), and reads and writes its manifest form itself; what a run produced
  is a `RunState`, which the results layer scores and writes.
- A finished or partial run: `FinishedRun` (a run folder read back: results.json, samples)
  and its `RunRecord` (manifest.json typed, written and read in one place).
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
- Data a task needs on disk: `DataNeeds(plugins)` (`lceval data status / fetch / pack /
  unpack`, and `validate`'s "data not installed"), built on each task type's `needs`; no run
  is opened.
- What reports and merges share: `tokens_label`, `removed_span` (a context cut), `assign` and
  `plan_fingerprint` (how a run's contexts are shared among its `--shard`s).
"""

from lceval.engine._cache import Cache
from lceval.engine._cached_model import CachedModel
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._family import family_file
from lceval.engine._context_policy import removed_span, tokens_label
from lceval.engine._data import DataNeeds
from lceval.engine._model_spec import ModelSpec, model_label
from lceval.engine._plan import check_spec
from lceval.engine._plugin_host import PluginInfo, Plugins, load_plugins
from lceval.engine._run_config import RunConfig
from lceval.engine._run_record import FinishedRun, RunRecord
from lceval.engine._runner import RunState
from lceval.engine._selection import assign, plan_fingerprint
from lceval.engine._session import Session, open_model
from lceval.engine._spec import ReportSettings, TaskSpec, load_spec

__all__ = [
    "Cache", "CachedModel", "Catalog", "DataNeeds", "FinishedRun", "ModelSpec", "PluginInfo", "Plugins", "ReportSettings",
    "RunConfig", "RunRecord", "RunState", "Session", "TaskSpec",
    "assign", "check_spec", "family_file", "load_catalog", "load_plugins", "load_spec", "model_label", "open_model",
    "plan_fingerprint", "removed_span", "tokens_label",
]
