"""NeedleBench (Li et al., 2024; OpenCompass), version 1, the paper's: single-needle retrieval,
multi-needle retrieval and reasoning in haystacks of 1K to 1M GPT-4 tokens, and the
ancestral-trace challenge. The `needlebench` task type builds the authors' prompts from the Hub
dataset `opencompass/NeedleBench`; the `needlebench` judge is their evaluators (the
Levenshtein-based single-needle score); `lceval report` draws the depth x length heatmap. Its
haystacks are built with the shared `lceval_plugins.haystack`."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import NeedlebenchTaskType

    register("needlebench", NeedlebenchTaskType())


@hookimpl
def register_judges(register):
    from .metric import NeedlebenchJudge

    register(NeedlebenchJudge.name, NeedlebenchJudge, options_schema=NeedlebenchJudge.OPTIONS)


@hookimpl
def register_report_panels(register):
    def needlebench_panels(ctx):
        """Score by needle depth x length, per run (the authors' heatmaps); for multi-needle
        retrieval, each needle's hits by its depth."""
        from lceval_plugins.haystack.heatmap import grid_figures

        def cells(sample):
            scores = [j for j in sample.judgments if j.score is not None]
            if not scores or "length" not in sample.metadata:
                return
            found, depths = scores[0].details.get("found"), sample.metadata.get("depths")
            if found is not None and depths:
                for d, hit in zip(depths, found):
                    yield str(d), str(sample.metadata["length"]), 100.0 if hit else 0.0
            elif "depth" in sample.metadata:
                yield str(sample.metadata["depth"]), str(sample.metadata["length"]), float(scores[0].score)

        return grid_figures(ctx, ("needlebench",), cells, row_title="depth",
                            what="Mean score of the samples (multi-needle retrieval: of the needles) at each depth (%) "
                                 "of each length.")

    register("needlebench", needlebench_panels)
