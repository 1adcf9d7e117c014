"""A real aligned ASR corpus made on this machine: sentences spoken by a synthesiser
(Debian's `espeak-ng`) and heard by an offline recogniser (`pocketsphinx`, whose PyPI wheel
ships the CMU US English acoustic model, language model and dictionary). No network.

The pairs are what the rules need (Thonet et al., 2024b, App. A learns them from RED-ACE: LibriSpeech
read by people, decoded by Google's recogniser); this corpus is smaller and its errors are
those of a formant synthesiser heard by a 2010s HMM recogniser, so it is much noisier than
RED-ACE (see README, "Noisy transcripts"). The voices rotate over the sentences so that the
errors do not come from one accent alone.

Building is resumable: each recognised pair is appended to `OUT.partial` at once, a second run
skips the pairs already there, and the finished corpus is renamed into place.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from lceval.io import write_text_atomic
from lceval.errors import PackageMissing, UserError

from lceval_plugins.transcript_noise.text import PROTECTED

SPEAKER = re.compile(r"^\s*\([A-Z][A-Z_]*\d*\)\s*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
RATE = 16000  # the acoustic model's sample rate


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


def split_sentences(text: str, source: str, min_words: int = 4, max_words: int = 25) -> list[Sentence]:
    """Speakable sentences of a text: speaker tags dropped, sentences holding a placeholder or
    an annotation (`[PERSON3]`, `<laugh/>`) skipped (a synthesiser would read them out)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = SPEAKER.sub("", line)
        for k, sentence in enumerate(SENTENCE_END.split(line.strip())):
            sentence = sentence.strip()
            if not sentence or PROTECTED.search(sentence):
                continue
            n_words = len(sentence.split())
            if min_words <= n_words <= max_words and sum(c.isalpha() for c in sentence) > 0.6 * len(sentence):
                out.append(Sentence(id=f"{source}:{n}.{k}", text=sentence))
    return out


def choose(sentences: list[Sentence], n: int | None, seed: int) -> list[Sentence]:
    """`n` distinct sentences drawn with `seed` (all, deduplicated, when n is None)."""
    unique: dict[str, Sentence] = {}
    for s in sentences:
        unique.setdefault(s.text, s)
    pool = list(unique.values())
    if n is None or n >= len(pool):
        return pool
    return random.Random(seed).sample(pool, n)


def tool_versions() -> dict[str, str]:
    from importlib.metadata import version

    espeak = _espeak()
    out = subprocess.run([espeak, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"text-to-speech:\s*(\S+)", out)
    return {"tts": f"espeak-ng {match.group(1) if match else '?'}",
            "asr": f"pocketsphinx {version('pocketsphinx')} (bundled en-us model)"}


def _espeak() -> str:
    path = shutil.which("espeak-ng")
    if path is None:
        raise UserError("espeak-ng is not installed", field="lceval noise corpus",
                        hint="apt-get install espeak-ng (Debian/Ubuntu)")
    return path


def speak(text: str, voice: str, speed: int) -> bytes:
    """16 kHz mono 16-bit PCM of `text` read by espeak-ng (text on stdin, so nothing in it is
    taken for an option)."""
    import numpy as np
    from scipy.signal import resample_poly

    proc = subprocess.run([_espeak(), "-v", voice, "-s", str(speed), "--stdout"], input=text.encode(),
                          capture_output=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout:
        raise UserError(f"espeak-ng failed on voice '{voice}': {proc.stderr.decode(errors='replace').strip()}",
                        field="--voices")
    with wave.open(io.BytesIO(proc.stdout)) as wav:
        rate, audio = wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
    if rate != RATE:
        from math import gcd

        g = gcd(RATE, rate)
        audio = np.clip(np.round(resample_poly(audio.astype(np.float64), RATE // g, rate // g)), -32768, 32767)
    # half a second of silence each side: the recogniser's voice activity detection needs a lead-in
    # (on 5 sentences: 89% WER without, 77% with, at 130 words per minute)
    silence = np.zeros(RATE // 2, dtype=np.int16)
    return np.concatenate([silence, audio.astype(np.int16), silence]).tobytes()


class Recogniser:
    """pocketsphinx with its bundled US English model, one decoder for every utterance."""

    def __init__(self) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise PackageMissing("the recogniser needs pocketsphinx", field="lceval noise corpus",
                                 hint="pip install 'lceval[noise]'") from None
        self.decoder = Decoder(samprate=RATE, logfn=os.devnull)

    def __call__(self, pcm: bytes) -> str:
        self.decoder.start_utt()
        self.decoder.process_raw(pcm, full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp is not None else ""


def _done(partial: Path) -> dict[str, dict[str, Any]]:
    if not partial.is_file():
        return {}
    done = {}
    for line in partial.read_text(encoding="utf-8", errors="replace").splitlines():  # damaged: redone
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by an interruption: redo that sentence
            continue
        if isinstance(record, dict) and "id" in record:
            done[record["id"]] = record
    return done


def build_corpus(sentences: Iterable[Sentence], out: Path, voices: list[str], speed: int,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Speak and recognise every sentence into `out` (JSONL); returns a summary."""
    todo = list(sentences)
    if not todo:
        raise UserError("no sentence to speak", field="SOURCE",
                        hint="Give text files with sentences of 4-25 words, or --elitr.")
    if not voices:
        raise UserError("at least one voice is needed", field="--voices")
    versions = tool_versions()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    done = _done(partial)
    recognise: Recogniser | None = None
    records, fresh = [], 0
    if partial.is_file() and not partial.read_bytes().endswith(b"\n"):
        with open(partial, "a", encoding="utf-8") as fh:  # close a line an interruption cut
            fh.write("\n")
    with open(partial, "a", encoding="utf-8") as fh:
        for i, sentence in enumerate(todo):
            voice = voices[i % len(voices)]
            record = done.get(sentence.id)
            if record is None or record.get("reference") != sentence.text or record.get("voice") != voice:
                recognise = recognise or Recogniser()
                hyp = recognise(speak(sentence.text, voice, speed))
                record = {"id": sentence.id, "reference": sentence.text, "hypothesis": hyp, "voice": voice,
                          "speed": speed, **versions}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                fh.flush()
                fresh += 1
            records.append(record)
            if progress:
                progress(i + 1, len(todo))
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    partial.unlink()
    return {"path": out, "pairs": len(records), "recognised": fresh, **versions}
