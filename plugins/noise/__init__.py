"""Transcript noise plugin: `lceval noise ...` (ASR corpus, substitution rules, noisy
transcripts at a target WER, robustness report; Thonet et al., 2024b, Sec. 3 and App. A).

The task types that read ELITR transcripts take `options.noise` through
`lceval_plugins.transcript_noise.transcripts`; this entry point adds the sub-commands and the
HTML report's noise panel.
"""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_commands(register):
    from .commands import NoiseCommand

    register("noise", NoiseCommand())


@hookimpl
def register_report_panels(register):
    def noise_panels(ctx):
        """The noise panels of the HTML report (numpy is imported when a report is drawn, not
        on every command: `lceval --help` must stay light)."""
        from .report_panel import noise_panels as panels

        return panels(ctx)

    register("noise", noise_panels)
