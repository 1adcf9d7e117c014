"""The docs test's reader of shell blocks: it must catch what it is there to catch (a block
marked wrongly, a command that fails, one that should fail and does not), or the docs test
would pass on any page."""

from __future__ import annotations

import subprocess

from .shell_blocks import block_script, commands, failure, fenced_blocks, marking_problems

PAGE = """# A page

```bash
echo one
# a comment line is no command
for x in a b; do
  echo "$x"
done
cat > f.txt <<'EOF2'
#!/bin/bash
text
EOF2
echo two \\
  three
false   # exits 2
lceval run --tasks t --model m   # ~10 min; the docs test adds --dry-run
```

```sh
# not run by the docs test: needs a GPU
vllm serve model
```

```text
output
```

````markdown
```bash
not a block of its own
```
````
"""


def _blocks(text):
    return fenced_blocks(text, "page.md")


def test_blocks_and_commands_are_read_as_a_shell_would():
    blocks = _blocks(PAGE)
    assert [(b.lang, b.line) for b in blocks] == [("bash", 3), ("sh", 19), ("text", 24), ("markdown", 28)]
    cmds = commands(blocks[0])
    assert [c.line for c in cmds] == [4, 6, 9, 13, 15, 16]
    assert cmds[1].text == 'for x in a b; do\n  echo "$x"\ndone'
    assert cmds[2].text.endswith("EOF2")          # the here-document is one command
    assert cmds[3].text == "echo two \\\n  three"
    assert [c.expect for c in cmds] == [0, 0, 0, 0, 2, 0]
    assert cmds[5].run == "lceval run --tasks t --model m --dry-run   # ~10 min; the docs test adds --dry-run"
    assert all(c.run == c.text for c in cmds[:5])
    assert all(not marking_problems(b) for b in blocks)


def test_wrong_markings_are_named_with_their_line():
    bad = _blocks("x\n\n```\nls\n```\n\n```console\n$ ls\n```\n\n```sh\nls\n```\n\n```bash\n# only a comment\n```\n")
    problems = [p for b in bad for p in marking_problems(b)]
    assert len(problems) == 4
    assert problems[0].startswith("page.md:3: a code block without a language")
    assert problems[1].startswith("page.md:7: ```console")
    assert problems[2].startswith("page.md:11: a ```sh block is not run") and "'ls'" in problems[2]
    assert problems[3].startswith("page.md:15: a ```bash block without a command")


def _run(text, tmp_path):
    (block,) = _blocks(text)
    cmds = commands(block)
    res = subprocess.run(["bash"], input=block_script(cmds), cwd=tmp_path, capture_output=True, text=True)
    return failure(cmds, res.stdout, res.returncode)


def test_a_block_that_runs_as_documented_passes(tmp_path):
    assert _run("```bash\nX=1\necho \"$X\" > out.txt\ntest \"$(cat out.txt)\" = 1\nbash -c 'exit 2'   # exits 2\n```\n",
                tmp_path) is None


def test_a_failing_command_names_page_line_and_output(tmp_path):
    problem = _run("```bash\necho fine\nls no-such-file\necho never\n```\n", tmp_path)
    assert problem is not None
    assert problem.startswith("page.md:3: the documented command\n  ls no-such-file\n")
    assert "must exit 0" in problem and "no-such-file" in problem.split("Its output", 1)[1]
    assert "never" not in problem


def test_a_command_that_should_fail_but_succeeds_is_a_failure(tmp_path):
    problem = _run("```bash\ntrue   # exits 2\n```\n", tmp_path)
    assert problem is not None and "exited 0" in problem and "must exit 2" in problem


def test_exit_1_is_not_the_documented_exit_2(tmp_path):
    problem = _run("```bash\nfalse   # exits 2\n```\n", tmp_path)
    assert problem is not None and "exited 1" in problem
