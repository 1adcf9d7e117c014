"""Transcript noise plugin: `lceval noise ...` (ASR corpus, substitution rules, noisy
transcripts at a target WER, robustness report; paper 001, Sec. 3 and App. A).

The task types that read ELITR transcripts take `options.noise` through
`lceval_plugins.noise.transcripts`; this entry point adds the sub-commands.
"""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_commands(register):
    from .commands import NoiseCommand

    register("noise", NoiseCommand())
