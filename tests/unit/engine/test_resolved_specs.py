"""Every shipped task spec, resolved (its family's defaults, the schema's and its task type's
option defaults filled, the family's departures added), is pinned by a digest: a change to a
spec, to a family's defaults or to a default of the engine that changes what a task runs with
shows here, task by task. Issue 40 moved the values that a family's specs repeat into the
family's defaults; this test proved that no resolved spec changed by a byte.

A change made on purpose is recorded with `python -m tests.unit.engine.test_resolved_specs`,
which rewrites the fixture (tests/data/specs/resolved.sha256) from the specs as they are."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from lceval.engine import check_spec, load_catalog, load_plugins

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "specs" / "resolved.sha256"


def resolved_digests() -> dict[str, str]:
    """Task name -> sha256 (16 hex digits) of its manifest form as canonical JSON: the spec
    file as <folder>/<file> and the resolved mapping, its `family` as the spec reports it."""
    plugins = load_plugins()
    catalog = load_catalog(plugins)
    out = {}
    for name in sorted(catalog.specs):
        spec = catalog.spec(name)
        check_spec(spec, plugins)
        form = spec.to_manifest()
        form["spec_path"] = "/".join(Path(form["spec_path"]).parts[-2:])
        form["spec"] = {**form["spec"], "family": spec.family}
        text = json.dumps(form, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        out[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return out


def read_fixture() -> dict[str, str]:
    rows = [line.split() for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {name: digest for name, digest in rows}


def test_every_resolved_spec_is_as_pinned():
    pinned, now = read_fixture(), resolved_digests()
    assert len(now) >= 356
    assert sorted(now) == sorted(pinned), "tasks added or removed: rewrite the fixture (see the module's docstring)"
    changed = [name for name in now if now[name] != pinned[name]]
    assert not changed, (f"{len(changed)} resolved spec(s) changed: {', '.join(changed[:10])}; if on purpose, "
                         "rewrite the fixture with `python -m tests.unit.engine.test_resolved_specs`")


if __name__ == "__main__":
    digests = resolved_digests()
    FIXTURE.write_text("".join(f"{n} {d}\n" for n, d in digests.items()), encoding="utf-8")
    print(f"wrote {len(digests)} digests to {FIXTURE}", file=sys.stderr)
