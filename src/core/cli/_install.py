"""A module that one of lceval's extras installs, not found: the pip line that installs it and
the `PackageMissing` that says so (exit 4), for `main`'s net and for `validate`."""

from __future__ import annotations

from lceval.errors import PackageMissing


def install_hint(module: str) -> str | None:
    """`pip install 'lceval[EXTRA]'` for a module that one of lceval's extras installs (its
    distribution named like the module, as jinja2, huggingface_hub, rouge_score are), read from
    lceval's own metadata; None for any other module. A plugin's own check usually says it
    first; this is the net under every plugin, so that a missing extra is never a traceback."""
    import re
    from importlib import metadata

    top = re.sub(r"[-_.]+", "-", module.partition(".")[0]).lower()
    try:
        requirements = metadata.requires("lceval") or []
    except metadata.PackageNotFoundError:
        return None
    extras = []
    for text in requirements:
        found = re.match(r"\s*([A-Za-z0-9._-]+).*extra\s*==\s*['\"]([^'\"]+)['\"]", text)
        if found and re.sub(r"[-_.]+", "-", found.group(1)).lower() == top and found.group(2) not in extras:
            extras.append(found.group(2))
    if not top or not extras:
        return None
    return "Install it with: " + " or ".join(f"pip install 'lceval[{e}]'" for e in extras[:3])


def package_missing(exc: ModuleNotFoundError, hint: str) -> PackageMissing:
    """A module an extra installs, not found, as the error that says so (exit 4)."""
    return PackageMissing(f"this needs the Python package '{exc.name}', which is not installed", hint=hint)
