"""The shell blocks of the documentation, as the docs test reads and runs them.

The convention (CONTRIBUTING.md, "Writing the docs"):

- a ```` ```bash ```` block is RUN: each command must exit 0, or 2 when it ends with the
  comment `# exits 2` (4 with `# exits 4`: valid, data not installed); a command whose comment
  says `the docs test adds --dry-run` runs with `--dry-run` added (a run too long for the test, whose flags and data are still checked);
- a ```` ```sh ```` block is shown but NOT run, and its first line says why:
  `# not run by the docs test: <why>`;
- output goes in ```` ```text ```` blocks; other blocks carry their file's language
  (`python`, `yaml`, `toml` ...). A fence without a language, or with another name for a
  shell (`shell`, `console`, `zsh` ...), is a marking error: the reader could not tell whether
  it was tested.

A command is a complete piece of shell: lines are joined until `bash -n` accepts them, so
backslash continuations, loops and here-documents are one command.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

RUN = "bash"
SHOWN = "sh"
NOT_RUN = re.compile(r"^# not run by the docs test: \S")
#: languages that are shells under another name: the marking must say bash (run) or sh (not run)
OTHER_SHELLS = {"shell", "console", "zsh", "fish", "shell-session", "sh-session", "bash-session", "shellsession",
                "terminal", "powershell", "ps1", "pwsh", "cmd", "bat", "batch"}
EXITS_2 = re.compile(r"#\s*exits ([24])\s*$")  # 2: bad input; 4: valid, data not installed (validate, data status)
DRY_RUN = "the docs test adds --dry-run"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    page: str        # path relative to the repository root
    line: int        # 1-based line of the opening fence
    lang: str        # first word of the info string ("" when none)
    lines: tuple[str, ...]  # the content, dedented to the fence

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Command:
    page: str
    line: int        # 1-based line of the command's first line in the page
    text: str        # as written (comments included)
    run: str         # as the test runs it (--dry-run added when the page says so)
    expect: int      # the exit status it must end with

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(text: str, page: str) -> list[Block]:
    """Every fenced code block of a Markdown text (fences inside a longer fence are content)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        start, body = i, []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if (close and close.group("fence")[0] == fence[0] and len(close.group("fence")) >= len(fence)
                    and not close.group("info").strip()):
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        lang = info.split()[0].lstrip(".{").rstrip("}").lower() if info else ""
        blocks.append(Block(page=page, line=start + 1, lang=lang, lines=tuple(body)))
        i += 1
    return blocks


def marking_problems(block: Block) -> list[str]:
    """What is wrong with how a block is marked (empty when nothing is)."""
    if not block.lang:
        return [f"{block.where}: a code block without a language: write ```bash (run by the docs test), "
                "```sh (shown, not run: its first line says why), ```text (output) or the file's language"]
    if block.lang in OTHER_SHELLS:
        return [f"{block.where}: ```{block.lang}: a shell block is ```bash (run by the docs test) or ```sh "
                "(shown, not run: its first line says why)"]
    if block.lang == SHOWN:
        first = next((line for line in block.lines if line.strip()), "")
        if not NOT_RUN.match(first):
            return [f"{block.where}: a ```sh block is not run, so its first line must say why: "
                    f"'# not run by the docs test: <why>' (found {first!r})"]
    if block.lang == RUN and not commands(block):
        return [f"{block.where}: a ```bash block without a command"]
    return []


def _complete(text: str) -> bool:
    """Whether `text` is complete shell (bash -n accepts it without a warning, such as the one
    for a here-document that has not reached its delimiter yet); a line that ends with a
    backslash continues on the next."""
    if text.rstrip("\n").endswith("\\"):
        return False
    res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    return res.returncode == 0 and not res.stderr.strip()


def _is_comment(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def commands(block: Block) -> list[Command]:
    """The commands of a ```bash block, each a complete piece of shell."""
    out: list[Command] = []
    pending: list[str] = []
    first = 0
    for n, line in enumerate(block.lines):
        if not pending and _is_comment(line):
            continue
        if not pending:
            first = n
        pending.append(line)
        text = "\n".join(pending)
        if _complete(text + "\n"):
            out.append(_command(block, block.line + 1 + first, text))
            pending = []
    if pending:
        text = "\n".join(pending)
        out.append(_command(block, block.line + 1 + first, text))  # incomplete: bash says why when run
    return out


def _command(block: Block, line: int, text: str) -> Command:
    last = text.splitlines()[-1]
    run = text
    at = last.find(DRY_RUN)
    if at >= 0:
        head = last[:last.rfind(" #", 0, at)].rstrip()
        lines = text.splitlines()
        lines[-1] = head + " --dry-run" + last[len(head):]
        run = "\n".join(lines)
    return Command(page=block.page, line=line, text=text, run=run, expect=int(m.group(1)) if (m := EXITS_2.search(last)) else 0)


def page_blocks(root: Path, page: Path) -> list[Block]:
    rel = page.relative_to(root).as_posix()
    return fenced_blocks(page.read_text(encoding="utf-8"), rel)


MARK = "@@lceval-docs-test@@"


def block_script(cmds: list[Command]) -> str:
    """One bash script for a block's commands (they share the block's shell variables): each
    command is announced on the output, then its exit status is checked; the first unexpected
    one stops the script with `exit 97` after printing `MARK fail INDEX STATUS`."""
    parts = ["exec 2>&1"]
    for i, cmd in enumerate(cmds):
        parts.append(f"echo '{MARK} start {i}'")
        parts.append(cmd.run)
        parts.append(f"__rc=$?; if [ $__rc -ne {cmd.expect} ]; then echo \"{MARK} fail {i} $__rc\"; exit 97; fi")
    parts.append(f"echo '{MARK} done'")
    return "\n".join(parts) + "\n"


def failure(cmds: list[Command], output: str, returncode: int) -> str | None:
    """None when every command of the block ended as it must, else what went wrong: the page,
    the line, the command and its output."""
    fail = re.search(rf"^{MARK} fail (\d+) (\d+)$", output, re.M)
    if fail is None and f"{MARK} done" in output and returncode == 0:
        return None
    if fail is not None:
        i, status = int(fail.group(1)), int(fail.group(2))
    else:  # the script itself ended early (a command called exit, or the block timed out)
        started = [int(x) for x in re.findall(rf"^{MARK} start (\d+)$", output, re.M)]
        i, status = (started[-1] if started else 0), returncode
    cmd = cmds[i]
    own = output.split(f"{MARK} start {i}\n", 1)[-1].split(f"{MARK} fail", 1)[0]
    want = f"exit {cmd.expect} (`# exits {cmd.expect}`)" if cmd.expect else "exit 0"
    shown = cmd.run if cmd.run == cmd.text else f"{cmd.text}\n  (run as: {cmd.run})"
    return (f"{cmd.where}: the documented command\n  {shown}\nexited {status}, the page says it must "
            f"{want}. Its output (last 3,000 characters):\n{own[-3000:]}")
