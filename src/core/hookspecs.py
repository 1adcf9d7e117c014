"""The hooks a plugin implements: lceval's plugin contract, one function per hook.

A plugin is a module named in the ``lceval`` entry-point group of its distribution; it
decorates functions named like these hooks with ``lceval.hookimpl``. Each ``register_*`` hook
receives a ``register`` callback, called once per thing provided. A plugin registers all or
nothing, names are global (built-ins win a clash unless ``-p override:NAME``), and options are
declared with ``options_schema`` (``lceval.options``). The guide to writing one, with the
example package and one section per hook, is docs/plugins.md.
"""

from __future__ import annotations

import pluggy

__all__ = ["hookimpl", "hookspec", "register_commands", "register_datasets", "register_judges",
           "register_methods", "register_models", "register_pairwise_judges", "register_report_panels", "register_retrievers",
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
def register_methods(register):
    """Register long-context methods (a KV-cache press, a sparse prefill) that a backend applies
    to its model as a setting (``hf:MODEL,press=NAME,compression_ratio=0.5``).

    ``register(name: str, factory: MethodFactory, options_schema=None)``, where
    ``factory(options)`` returns a ``lceval.methods.ContextMethod``; ``options`` are the
    ``press.KEY=VALUE`` options of the model string (checked when ``options_schema`` is given)
    plus ``compression_ratio`` (the backend's; None when not given). NVIDIA's kvpress presses
    are the built-in ones.
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

    Every ``*.yaml`` in the folder is a task spec; its ``name`` field is the task name. A
    name starting with ``_`` is none: ``_family.yaml`` is the family file, what every spec of the
    folder shares (its fidelity record against the authors' code; schema
    ``lceval/io/schemas/family.schema.json``).
    """


@hookspec
def register_score_sources(register):
    """Register readers of recorded scores, for ``lceval judge-agreement``.

    ``register(name: str, reader: ScoreSourceReader)``: ``reader(path)`` returns ``None`` when
    the file is not in its format, else a list of ``lceval.types.ScoreSource`` (one per
    scorer recorded in the file, e.g. a GPT-4 judge and two groups of annotators).
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
    ReportContext)`` returns a list of ``ReportFigure`` (Vega-Lite charts; ``lceval.report``'s
    ``charts`` and ``figure`` build them), empty when the runs hold nothing it draws. A panel
    that raises is shown as failed; the rest of the report is unaffected.
    """
