"""NoLiMa (Modarressi et al., 2025; adobe-research/NoLiMa): long-context retrieval beyond literal
matching. The `nolima` task type places the authors' needles (or any needle set in their schema)
in any folder of books at each depth and length in the evaluated model's tokens; the `nolima`
judge is their metric; `lceval report` draws their depth x length heatmap. The authors' data is
under the Adobe Research License (non-commercial research only): users download it themselves."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import NolimaTaskType

    register("nolima", NolimaTaskType())


@hookimpl
def register_judges(register):
    from .metric import NolimaJudge

    register(NolimaJudge.name, NolimaJudge, options_schema=NolimaJudge.OPTIONS)


@hookimpl
def register_report_panels(register):
    def nolima_panels(ctx):
        """Score by needle depth x length, per run (the paper's heatmaps)."""
        from lceval_plugins.haystack.heatmap import cells_by_field, grid_figures

        return grid_figures(ctx, ("nolima",), cells_by_field("depth"), row_title="depth",
                            what="Mean score of the samples whose needle sits at each depth (%) of each length.")

    register("nolima", nolima_panels)
