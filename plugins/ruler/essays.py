"""`lceval data fetch ruler-essays`: the essay haystack RULER's scripts build (NVIDIA/RULER
c3f5e3b4, scripts/data/synthetic/json/download_paulgraham_essay.py), from the same sources, into
the data home as RULER's `PaulGrahamEssays.json` (`{"text": ...}`). It is never shipped: the
essays are Paul Graham's, and lceval only downloads them for the user.

The sources are RULER's list (PaulGrahamEssays_URLs.txt, kept in essay_sources.tsv in its
order): 49 essays as text files of gkamradt/LLMTest_NeedleInAHaystack, pinned here at a commit
with their sha256 (a file with other content is refused), and 169 pages of paulgraham.com,
which publishes no versions, so a fetch records the sha256 of each page it got (the data
home's CHECKSUMS.json) and a later fetch that gets another content for one names it instead of
taking it (lceval.io's fetch). The pages are cleaned as RULER's script cleans them: decoded
with `unicode_escape`, the first `<font>` element taken (BeautifulSoup, html.parser) and turned
to text by html2text with RULER's settings; a page that fails is left out, as RULER's script
leaves it out (printing "Fail download"), and the install lists it. The text is RULER's
concatenation: the GitHub files sorted by name, then the pages sorted by name, nothing between.

`--from FOLDER` takes the same files by name (the .txt files and the .html pages as
downloaded), or a `PaulGrahamEssays.json` RULER's script made; `--from URL` is a prefix the
file names are appended to (a mirror).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io import sha256_file

__all__ = ["ESSAYS_FILE", "ESSAYS_NAME", "EssayFile", "clean_page", "essay_files", "ruler_essays"]

ESSAYS_NAME = "ruler-essays"
ESSAYS_FILE = "PaulGrahamEssays.json"
SOURCES = "sources.json"
DOWNLOAD_TIMEOUT_S = 60


@dataclass(frozen=True)
class EssayFile:
    """One entry of RULER's list: the file name it is saved under, its URL, its pinned sha256
    (None: a paulgraham.com page, which publishes no versions)."""

    name: str
    url: str
    sha256: str | None

    @property
    def is_page(self) -> bool:
        return ".html" in self.url  # download_paulgraham_essay.py: `if '.html' in url`


def essay_files() -> list[EssayFile]:
    """RULER's essay URLs in its order (essay_sources.tsv)."""
    out = []
    text = (Path(__file__).parent / "essay_sources.tsv").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, url, digest = line.split("\t")
            out.append(EssayFile(name, url, digest or None))
    return out


def _check_pinned(source: EssayFile, path: Path) -> None:
    actual = sha256_file(path)
    if source.sha256 and actual != source.sha256:
        raise UserError(f"{source.name} has sha256 {actual}, not the {source.sha256} pinned for {source.url} "
                        "(a different or damaged file); the data home was left unchanged", file=path)


def download(folder: Path, base: str | None, say: Callable[[str], None],
             sources: list[EssayFile] | None = None) -> dict[str, Path]:
    """Every essay file by name into `folder`, from its URL (or `base`/NAME); a pinned file
    that does not match is refused, a page that cannot be got is left out (as RULER does)."""
    got: dict[str, Path] = {}
    for source in sources if sources is not None else essay_files():
        url = f"{base.rstrip('/')}/{source.name}" if base else source.url
        path = folder / source.name
        try:
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp, open(path, "wb") as out:
                shutil.copyfileobj(resp, out)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if source.sha256:  # the pinned files are the part of the corpus that can be checked: all of them
                raise UserError(f"cannot download {url}: {getattr(exc, 'reason', exc)}",
                                hint="Download RULER's essay files on a machine with network and pass their "
                                     f"folder: `lceval data fetch {ESSAYS_NAME} --from FOLDER`") from None
            say(f"  left out {source.name}: cannot download {url} ({getattr(exc, 'reason', exc)}), as RULER's "
                "script leaves out a page it fails to get")
            path.unlink(missing_ok=True)
            continue
        _check_pinned(source, path)
        got[source.name] = path
    return got


def collect(folder: Path) -> dict[str, Path]:
    """The essay files of a `--from` folder: RULER's PaulGrahamEssays.json, else every file of
    the list (the pinned ones checked; a page absent is left out, a pinned file absent is refused)."""
    if not folder.is_dir():
        raise UserError("--from must be a folder of RULER's essay files, or one holding PaulGrahamEssays.json",
                        file=folder, field="--from")
    made = folder / ESSAYS_FILE
    if made.is_file():
        return {ESSAYS_FILE: made}
    sources = essay_files()
    absent = [s.name for s in sources if s.sha256 and not (folder / s.name).is_file()]
    if absent:
        raise UserError(f"{len(absent)} of the {sum(bool(s.sha256) for s in sources)} pinned essay files are not in "
                        f"the folder: {', '.join(absent[:5])}{' ...' if len(absent) > 5 else ''}", file=folder,
                        field="--from", hint=f"Pass a folder of RULER's essay files (docs/tasks/ruler.md) or of "
                                             f"the {ESSAYS_FILE} its script makes.")
    got = {}
    for source in sources:
        path = folder / source.name
        if path.is_file():
            _check_pinned(source, path)
            got[source.name] = path
    return got


def clean_page(raw: bytes) -> str:
    """A paulgraham.com page as download_paulgraham_essay.py turns it to text: decoded with
    `unicode_escape`, the first <font> element, html2text with RULER's settings."""
    try:
        import html2text
        from bs4 import BeautifulSoup
    except ImportError:
        raise UserError("cleaning the paulgraham.com pages as RULER's script does needs beautifulsoup4 and "
                        "html2text", hint="pip install 'lceval[ruler]'") from None
    h = html2text.HTML2Text()
    h.ignore_images = True
    h.ignore_tables = True
    h.escape_all = True
    h.reference_links = False
    h.mark_code = False
    content = raw.decode("unicode_escape", "utf-8")
    return h.handle(str(BeautifulSoup(content, "html.parser").find("font")))


def _universal(text: str) -> str:
    """What RULER reads back from the file it wrote (text mode: universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def install(files: dict[str, Path], dest: Path) -> None:
    """PaulGrahamEssays.json as RULER's script writes it, and sources.json (what went in)."""
    if ESSAYS_FILE in files:
        shutil.copyfile(files[ESSAYS_FILE], dest / ESSAYS_FILE)
        (dest / SOURCES).write_text(json.dumps({"from": ESSAYS_FILE}, indent=1) + "\n", encoding="utf-8")
        return
    by_name = {s.name: s for s in essay_files()}
    repo, pages, failed = [], [], []
    for name in sorted(files, key=lambda n: (by_name[n].is_page, n.replace(".html", ".txt"))):
        if by_name[name].is_page:
            try:
                pages.append(_universal(clean_page(files[name].read_bytes())))
            except (UnicodeDecodeError, LookupError):  # RULER: "Fail download", the page left out
                failed.append(name)
        else:
            repo.append(_universal(files[name].read_bytes().decode("utf-8")))
    text = "".join(repo + pages)
    if not text.strip():
        raise UserError("the essay files hold no text", field="--from")
    (dest / ESSAYS_FILE).write_text(json.dumps({"text": text}), encoding="utf-8")
    left_out = sorted(set(by_name) - set(files)) + failed
    record = {"files": len(repo) + len(pages), "github_files": len(repo), "pages": len(pages),
              "left_out": sorted(left_out)}
    (dest / SOURCES).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def ruler_essays() -> Dataset:
    return Dataset(
        name=ESSAYS_NAME,
        description="RULER's essay haystack (Paul Graham's essays, from RULER's own sources; not redistributed)",
        files=[], install=install, license="the essays' author's; downloaded for the user, never shipped",
        collect=collect, download=download)
