"""A tiny ELITR-Bench-shaped dataset written by us (not real data), built into a temporary
data home by the `tiny_home` fixture: three meetings, seven questions, all answerable."""

from __future__ import annotations

import copy
import json
from pathlib import Path


def _meeting(mid: str, qs: list[tuple[str, str, str, str]]) -> dict:
    return {"id": mid, "questions": [
        {"id": str(i + 1), "question-type": t, "answer-position": p, "question": q, "groundtruth-answer": a}
        for i, (t, p, q, a) in enumerate(qs)]}


DEV = {"split": "dev", "meetings": [
    _meeting("meeting_en_dev_901", [
        ("who", "B", "Who opened the meeting?", "[PERSON1]"),
        ("what", "M", "Which tool did they choose for the demo?", "The orange dashboard"),
        ("when", "E", "When is the next meeting?", "Friday at noon"),
    ]),
    _meeting("meeting_en_dev_902", [
        ("howmany", "S", "How many people attended?", "Three people"),
        ("what", "M", "What broke during the test?", "The microphone cable"),
    ]),
]}
TEST2 = {"split": "test2", "meetings": [
    _meeting("meeting_en_test2_901", [
        ("who", "E", "Who will write the report?", "[PERSON2]"),
        ("what", "M", "What is the budget problem?", "The travel budget is exhausted"),
    ]),
]}
TRANSCRIPTS = {
    "meeting_en_dev_901": "(PERSON1) Hello everyone, let us start.\n(PERSON2) Hi.\n"
    "(PERSON1) For the demo we choose the orange dashboard.\n(PERSON3) Fine with me.\n"
    "(PERSON1) The next meeting is on Friday at noon.\n",
    "meeting_en_dev_902": "(PERSON4) Three of us are here today.\n"
    "(PERSON5) During the test the microphone cable broke.\n(PERSON4) Okay.\n",
    "meeting_en_test2_901": "(PERSON2) I will write the report.\n"
    "(PERSON6) The travel budget is exhausted, that is the budget problem.\n",
}

#: Human-style minutes (bullets under a header, as the real ones), for the `cream` task type.
MINUTES = {
    "meeting_en_dev_901": {"minutes_GENER_annot01.txt": "Demo planning\nDate: 1. 2. 2021\nAttendees: [PERSON1], "
                           "[PERSON2], [PERSON3]\n\n- The orange dashboard was chosen for the demo.\n"
                           "- The next meeting is on Friday at noon.\n\nMinutes submitted by: [ANNOTATOR1]\n",
                           "minutes_GENER_annot02.txt": "- Orange dashboard chosen for the demo\n"
                           "- Next meeting Friday noon\n"},
    "meeting_en_dev_902": {"minutes_ORIG.txt": "- Three people attended.\n- The microphone cable broke during "
                           "the test.\n"},
    "meeting_en_test2_901": {"minutes_GENER_annot03.txt": "- [PERSON2] will write the report.\n"
                             "- The travel budget is exhausted.\n"},
}


def build(home: Path) -> Path:
    """Write the dataset as `home/elitr-bench/...`; returns `home`."""
    root = home / "elitr-bench"
    for sub in ("data", "czech", "transcripts"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    conv_dev = copy.deepcopy(DEV)
    conv_dev["meetings"][0]["questions"][2]["question"] = "And when do they meet again?"
    cs_dev = copy.deepcopy(DEV)
    cs_dev["meetings"][0]["questions"][0]["question"] = "Kdo zahájil schůzku?"
    files = {
        "data/elitr-bench-qa_dev.json": DEV, "data/elitr-bench-qa_test2.json": TEST2,
        "data/elitr-bench-conv_dev.json": conv_dev, "data/elitr-bench-conv_test2.json": TEST2,
        "czech/elitr-bench-czech-qa_dev.json": cs_dev, "czech/elitr-bench-czech-qa_test2.json": TEST2,
    }
    for rel, data in files.items():
        (root / rel).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    for mid, text in TRANSCRIPTS.items():
        (root / "transcripts" / f"{mid}.txt").write_text(text, encoding="utf-8")
    for mid, files in MINUTES.items():
        (root / "minutes" / mid).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (root / "minutes" / mid / name).write_text(text, encoding="utf-8")
    return home
