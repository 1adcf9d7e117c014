"""The `elitr-bench` dataset: the archives as published, laid out for the `elitr` task type.

Questions, answers and recorded generations come from the ELITR-Bench repository (zip
password `utter`, as its README says: "indicate 'utter' as password"). Transcripts and
minutes come from the ELITR-English dev/test tarballs redistributed by the UTTER project
(zipped with the same password).

Which transcript file: every meeting folder in the tarballs holds both
`transcript_MAN*.txt` and `<meeting id>.txt`. ELITR-Bench's own
`preparation/extract_transcripts.py` copies the `transcript_MAN*` file to `<meeting id>.txt`,
so that is the text the benchmark was built and evaluated on, and what we install. For 17
meetings the two files are byte-identical. For meeting_en_test2_008 they differ only by
trailing whitespace on 32 of 1213 lines: `transcript_MAN_annot13.txt` (54334 bytes, with the
trailing spaces) vs `meeting_en_test2_008.txt` (54300 bytes, stripped). The copy in
../shared/datasets/elitr-bench/transcripts is the transcript_MAN one, so a fetch from the
archives reproduces all 18 shared transcripts byte for byte (checked by
tests/integration/test_fetch_elitr.py).

Layout under the data home's `elitr-bench/`:
  data/elitr-bench-{qa,conv}_{dev,test2}.json      czech/elitr-bench-czech-{qa,conv}_{split}.json
  generated-responses/*.json (7 files)             transcripts/<meeting id>.txt (18)
  minutes/<meeting id>/minutes_*.txt
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path, PurePosixPath
from typing import Callable

from lceval.io import extract_zip, is_junk, read_zip_member, safe_relpath
from lceval.errors import UserError
from lceval.interfaces import Dataset, DatasetFile

# Official locations: data.zip, czech.zip and generated-responses.zip sit at the root of
# utter-project/ELITR-Bench, ELITR-English-{dev,test}.tar.zip at the root of
# utter-project/UTTER-MS9-meetingdata (both seen in the public code index). `raw/HEAD`
# follows each repository's default branch, whatever it is named.
BENCH = "https://github.com/utter-project/ELITR-Bench/raw/HEAD"
MEETINGS = "https://github.com/utter-project/UTTER-MS9-meetingdata/raw/HEAD"
PASSWORD = "utter"
SPLITS = ("dev", "test2")
MEETING_IDS = [f"meeting_en_dev_{i:03d}" for i in range(1, 11)] + [
    f"meeting_en_test2_{i:03d}" for i in range(1, 9)]

FILES = [
    DatasetFile("data.zip", f"{BENCH}/data.zip",
                "0ae6e9ffe0cefd3079011154f5890176ad01feb0bf810ac16fc48b201c11e536", PASSWORD),
    DatasetFile("generated-responses.zip", f"{BENCH}/generated-responses.zip",
                "ec32dcc18b6ea018eeda89e904e6ec772c8097b7bc7d640832589b70067dce68", PASSWORD),
    DatasetFile("czech.zip", f"{BENCH}/czech.zip",
                "7bb423f3b13f89c88f2dfe9cb2849840c5cd45923cb72e099f8158cccbbddd67", PASSWORD),
    DatasetFile("ELITR-English-dev.tar.zip", f"{MEETINGS}/ELITR-English-dev.tar.zip",
                "9f4e2470f5cbd97965efd9b943c3d58c28c847ac81765e35c98bf1cd61418bb9", PASSWORD),
    DatasetFile("ELITR-English-test.tar.zip", f"{MEETINGS}/ELITR-English-test.tar.zip",
                "d68a1d2be564bbeda178bb511f64919ee6e0c9669a156b349f2f919781b28276", PASSWORD),
]

#: archive -> (its top folder, our folder, files that must come out of it)
ZIPPED_JSON: dict[str, tuple[str, str, list[str]]] = {
    "data.zip": ("data", "data", [f"elitr-bench-{v}_{s}.json" for v in ("qa", "conv") for s in SPLITS]),
    "czech.zip": ("czech", "czech",
                  [f"elitr-bench-czech-{v}_{s}.json" for v in ("qa", "conv") for s in SPLITS]),
    "generated-responses.zip": ("generated-responses", "generated-responses", []),
}


def _json_from(top: str, folder: str) -> Callable[[PurePosixPath], PurePosixPath | None]:
    """Keep `<top>/<name>.json` members (only those), written as `<folder>/<name>.json`."""
    def select(rel: PurePosixPath) -> PurePosixPath | None:
        if len(rel.parts) == 2 and rel.parts[0] == top and rel.suffix == ".json":
            return PurePosixPath(folder, rel.name)
        return None
    return select


def _meetings_from_tar(archive: Path, dest: Path) -> set[str]:
    """Transcripts and minutes of the benchmark's meetings in the tarball inside `archive`.

    Only regular files directly in a known meeting folder are read (never extractall), and
    they are written under names we build, so the tar cannot choose where bytes land.
    """
    blob = read_zip_member(archive, ".tar", PASSWORD)
    found: set[str] = set()
    try:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
            for member in tf.getmembers():
                if not member.isfile() or is_junk(member.name):
                    continue
                parts = safe_relpath(member.name, archive).parts
                if len(parts) != 3 or parts[1] not in MEETING_IDS:
                    continue
                meeting, name = parts[1], parts[2]
                if name.startswith("transcript_MAN"):
                    if meeting in found:
                        raise UserError(f"two transcript_MAN files for {meeting}", file=archive,
                                        field=member.name)
                    out = dest / "transcripts" / f"{meeting}.txt"
                    found.add(meeting)
                elif name.startswith("minutes"):
                    out = dest / "minutes" / meeting / name
                else:
                    continue
                extracted = tf.extractfile(member)
                if extracted is None:
                    raise UserError("unreadable tar member", file=archive, field=member.name)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(extracted.read())
    except (tarfile.TarError, EOFError) as exc:
        raise UserError(f"cannot read the tarball inside: {exc}", file=archive) from None
    return found


def install(archives: dict[str, Path], dest: Path) -> None:
    """Write the layout above under `dest` from the verified archives (by file name)."""
    for archive, (top, folder, required) in ZIPPED_JSON.items():
        written = extract_zip(archives[archive], dest, PASSWORD, _json_from(top, folder))
        missing = sorted(set(required) - {p.name for p in written})
        if missing or not written:
            raise UserError(f"expected files missing: {', '.join(missing) or top + '/*.json'}",
                            file=archives[archive])
    found: set[str] = set()
    for name in ("ELITR-English-dev.tar.zip", "ELITR-English-test.tar.zip"):
        found |= _meetings_from_tar(archives[name], dest)
    missing = sorted(set(MEETING_IDS) - found)
    if missing:
        raise UserError(f"no transcript found for {', '.join(missing)}", field="elitr-bench")


ELITR_BENCH = Dataset(
    name="elitr-bench",
    description="ELITR-Bench: 271 questions on 18 meeting transcripts (dev, test2), Czech questions, "
    "recorded generations with judge and human scores, meeting minutes (CC BY 4.0)",
    files=FILES,
    install=install,
    license="CC BY 4.0",
)
