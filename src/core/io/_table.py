"""The one plain-text table lceval prints (a run's scores, `compare`, `rank`, `tasks
--families`, `plugins`), and its Markdown twin: one place decides how a column is padded, so
every table reads alike and a change of look is made once. It lives this low so that every
layer and plugin can draw with it, and a listing command imports nothing heavy for it."""

from __future__ import annotations

from typing import Sequence


def text_table(rows: Sequence[Sequence[str]], *, rule: bool = True, markdown: bool = False, strip: bool = True,
               widths: Sequence[int | None] | None = None) -> list[str]:
    """The lines of a table whose first row is the header. As text: columns two spaces
    apart, each as wide as its widest cell (or its given width: `widths`, None for the
    widest), the header underlined with dashes (`rule`), no trailing spaces (`strip`; the
    last column is never padded). As Markdown: a pipe table."""
    head, *body = rows
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in body]
    given = list(widths or [None] * len(head))
    sizes = [given[i] if given[i] is not None else max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for row in rows:
        line = "  ".join([c.ljust(w) for c, w in zip(row[:-1], sizes)] + list(row[-1:]))
        lines.append(line.rstrip() if strip else line)
    if rule:
        lines.insert(1, "  ".join("-" * w for w in sizes))
    return lines
