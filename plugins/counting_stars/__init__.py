"""Counting-Stars (Song et al., 2024; nick7nlp/Counting-Stars): 32 star counts spread evenly
through a haystack of 4K to 128K, to be collected as JSON. The `counting_stars` task type builds
the authors' rows from the user's copy of their context_data; the `counting_stars` judge is their
scoring; `lceval report` draws their star x length heatmap."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import CountingStarsTaskType

    register("counting_stars", CountingStarsTaskType())


@hookimpl
def register_judges(register):
    from .metric import CountingStarsJudge

    register(CountingStarsJudge.name, CountingStarsJudge, options_schema=CountingStarsJudge.OPTIONS)


@hookimpl
def register_report_panels(register):
    def counting_stars_panels(ctx):
        """Score by star (counting times) x length, per run (the paper's heatmaps)."""
        from lceval_plugins.haystack.heatmap import grid_figures

        def cells(sample):
            for j in sample.judgments:
                for t, v in enumerate(j.details.get("stars") or []):
                    yield str(t + 1), str(sample.metadata.get("length")), 100.0 * float(v)
                break

        return grid_figures(ctx, ("counting_stars",), cells, row_title="star",
                            what="Mean score of each star (counting times, 1 = nearest the start) at each length.")

    register("counting_stars", counting_stars_panels)
