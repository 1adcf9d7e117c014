"""The `elitr-bench` dataset: the archives as published, laid out for the `elitr` task type.

Questions, answers and recorded generations come from the ELITR-Bench repository (zip
password `utter`, as its README says). Transcripts and minutes come from the ELITR-English
dev/test tarballs redistributed by the UTTER project. The transcript of a meeting is its
`transcript_MAN*.txt` file, exactly as ELITR-Bench's own `preparation/extract_transcripts.py`
copies it (for meeting_en_test2_008, the `<meeting>.txt` file beside it differs by trailing
whitespace; the transcript_MAN file is the one the benchmark used).

Layout under the data home's `elitr-bench/`:
  data/elitr-bench-{qa,conv}_{dev,test2}.json      czech/elitr-bench-czech-{qa,conv}_{split}.json
  generated-responses/*.json                       transcripts/<meeting id>.txt
  minutes/<meeting id>/minutes_*.txt
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from lceval.datahome import extract_zip, is_junk, safe_relpath
from lceval.errors import UserError
from lceval.interfaces import Dataset, DatasetFile

BENCH = "https://github.com/utter-project/ELITR-Bench/raw/main"
MEETINGS = "https://github.com/utter-project/UTTER-MS9-meetingdata/raw/main"
PASSWORD = "utter"
MEETING_IDS = [f"meeting_en_dev_{i:03d}" for i in range(1, 11)] + [f"meeting_en_test2_{i:03d}" for i in range(1, 9)]

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


def _json_into(folder: str):
    def select(rel: PurePosixPath) -> PurePosixPath | None:
        return PurePosixPath(folder, rel.name) if rel.suffix == ".json" else None
    return select


def _meetings_from_tar(archive: Path, dest: Path) -> set[str]:
    """Transcripts and minutes of every meeting folder in the tarball inside `archive`."""
    found: set[str] = set()
    with zipfile.ZipFile(archive) as zf:
        tars = [i for i in zf.infolist() if i.filename.endswith(".tar") and not is_junk(i.filename)]
        if len(tars) != 1:
            raise UserError("expected exactly one .tar inside", file=archive)
        blob = zf.read(tars[0], pwd=PASSWORD.encode())
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
                    raise UserError(f"two transcript_MAN files for {meeting}", file=archive)
                out = dest / "transcripts" / f"{meeting}.txt"
                found.add(meeting)
            elif name.startswith("minutes"):
                out = dest / "minutes" / meeting / name
            else:
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            extracted = tf.extractfile(member)
            assert extracted is not None
            out.write_bytes(extracted.read())
    return found


def install(archives: dict[str, Path], dest: Path) -> None:
    extract_zip(archives["data.zip"], dest, PASSWORD, _json_into("data"))
    extract_zip(archives["generated-responses.zip"], dest, PASSWORD, _json_into("generated-responses"))
    extract_zip(archives["czech.zip"], dest, PASSWORD, _json_into("czech"))
    found = set()
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
