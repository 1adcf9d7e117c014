"""Every hook a plugin can implement: the plugin author's whole reference.

A plugin is a module (or object) named in the ``lceval`` entry-point group of its
distribution's metadata::

    [project.entry-points.lceval]
    myplugin = "my_package.lceval_plugin"

Inside it, decorate functions with ``lceval.hookimpl``. Every ``register_*`` hook receives a
``register`` callback; call it once per thing you provide. A function named like a hook but
spelled otherwise (``register_model``) is never called: lceval reports it on every command
and ``lceval validate`` refuses it.

Names are global. When two plugins give one name, the first in this order keeps it: plugins
named with ``-p override:NAME`` (or $LCEVAL_OVERRIDE_PLUGINS), lceval's built-ins, then the
others by distribution and entry-point name; each clash is printed on every command and
recorded in the run manifest (``plugin_clashes``). A plugin registers all or nothing: if one
of its hooks raises, or it registers something unusable (a factory that is not callable, a
task type that is not a ``TaskType``, a bad options schema, one name twice), nothing it
registered is used and ``lceval plugins`` reports it as failed.

Plugins that take user options (backends, judges, pairwise judges, retrievers) declare them
with ``register(name, factory, options_schema=SCHEMA)``: a JSON Schema object whose
``properties`` give each option's ``type``, ``default``, ``description`` and bounds (see
``lceval.options``; ``lceval.options.NO_OPTIONS`` for none). The engine then converts
``,key=value`` text to the declared types (a ``number`` is always a float, an ``integer`` an
int), refuses unknown keys (with a did-you-mean), bad types, out-of-range values and
secrets (``api_key=...``, never echoed) before the factory runs, fills in the defaults, and
lists the options in ``lceval plugins NAME``; the factory receives the checked mapping.
Without a schema the options arrive unchecked. Public helpers for plugins: ``lceval.options``,
``lceval.judging`` (model-calling judges), ``lceval.tokens`` (budgets, tokenizer check).
Keep module imports light: heavy libraries (torch, llama_cpp ...) belong inside factories,
so that ``lceval --help`` and ``lceval tasks`` stay instant.
"""

from __future__ import annotations

import pluggy

__all__ = ["hookimpl", "hookspec", "register_commands", "register_datasets", "register_judges",
           "register_models", "register_pairwise_judges", "register_report_panels", "register_retrievers",
           "register_score_sources", "register_spec_dirs", "register_task_types"]

hookspec = pluggy.HookspecMarker("lceval")
hookimpl = pluggy.HookimplMarker("lceval")


@hookspec
def register_models(register):
    """Register model backends by scheme.

    ``register(scheme: str, factory: ModelFactory, options_schema=None)``, where
    ``factory(model, options)`` gets the text after ``SCHEME:`` and the ``,key=value``
    options of a model spec string (typed and defaulted when ``options_schema`` is given)
    and returns a ``lceval.interfaces.ModelBackend``.
    """


@hookspec
def register_judges(register):
    """Register judges by name.

    ``register(name: str, factory: JudgeFactory, options_schema=None)``, where
    ``factory(ctx: JudgeContext)`` returns a ``lceval.interfaces.Judge``; ``ctx.options`` are
    the ``--judge NAME,key=value`` options (checked when ``options_schema`` is given);
    ``ctx.model`` is the ``--judge-model`` backend (cached) or None.
    """


@hookspec
def register_pairwise_judges(register):
    """Register judges that compare two responses (for ``lceval rank``).

    ``register(name: str, factory: PairwiseJudgeFactory, options_schema=None)``, where
    ``factory(ctx: JudgeContext)``
    returns a ``lceval.interfaces.PairwiseJudge``; ``ctx.model`` is the ``--judge-model``
    backend (cached) or None.
    """


@hookspec
def register_retrievers(register):
    """Register retrievers by name: ``register(name: str, factory: RetrieverFactory,
    options_schema=None)``; ``factory(options)`` receives ``{"seed": run seed, **options}``
    (the spec's ``retriever_options``, checked against ``options_schema`` when given; ``seed``
    is the engine's and needs no declaring)."""


@hookspec
def register_task_types(register):
    """Register task types that YAML specs name with ``type:``.

    ``register(name: str, task_type: lceval.interfaces.TaskType)``.
    """


@hookspec
def register_datasets(register):
    """Register datasets for ``lceval data fetch``: ``register(dataset: lceval.interfaces.Dataset)``."""


@hookspec
def register_spec_dirs(register):
    """Contribute folders of YAML task specs: ``register(path: pathlib.Path)``.

    Every ``*.yaml`` in the folder is a task spec; its ``name`` field is the task name.
    """


@hookspec
def register_score_sources(register):
    """Register readers of recorded scores, for ``lceval judge-agreement``.

    ``register(name: str, reader: ScoreSourceReader)``, where ``reader(path)`` returns
    ``None`` when the file is not in its format, else a list of
    ``lceval.agreement.ScoreSource`` (one per scorer recorded in the file: e.g. a GPT-4 judge
    and two groups of human annotators). Run directories are read by the engine itself.
    """


@hookspec
def register_commands(register):
    """Add ``lceval`` sub-commands that belong to one benchmark (e.g. building a haystack).

    ``register(name: str, command: lceval.interfaces.Command)``: the command's
    ``add_arguments(parser)`` declares its flags and ``run(args) -> str`` does the work and
    returns what to print; it raises ``lceval.errors.UserError`` on bad input.
    """


@hookspec
def register_report_panels(register):
    """Add figures to ``lceval report --format html`` for what the engine cannot know
    (e.g. SummHay's retrievers and budgets, which live in its spec options).

    ``register(name: str, panel: lceval.interfaces.ReportPanel)``: ``panel(ctx:
    ReportContext)`` returns a list of ``ReportFigure``, each a Vega-Lite chart spec (draw
    with ``lceval.report.charts``, whose builders give hover details, legend filtering and
    the model colours of the rest of the page, or with ``altair``; wrap with
    ``lceval.report.figure(chart, title, caption, section)``), empty when the runs hold
    nothing it draws. The engine already draws every group,
    metric and breakdown of results.json, rankings and judge agreement; a panel that
    raises is shown as a failed panel, the rest of the report is unaffected.
    """
