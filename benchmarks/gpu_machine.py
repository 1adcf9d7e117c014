"""What both GPU checks (benchmarks/gpu_check.py, benchmarks/gpu_long_context.py) stand on:
the machine, measured here, and the model, built here with nothing downloaded.

- The machine: the device, the versions (Python, torch, CUDA, transformers, lceval), and the
  card's own ceilings measured now: a dense matrix product in the model's dtype (FLOP/s) and a
  device-to-device copy (bytes/s, read plus written), with the datasheet's figures for the
  cards it knows. Each check sets its figures against these.
- The model folder: a randomly initialised model with a real configuration (`CONFIGS`: their
  config.json's shape), built on the device and saved with a tokenizer trained here (a
  byte-level BPE of 4,096 tokens on text it generates) and a Llama-3-style chat template.
- What both print with and how both pick their device: `say`, `si`, `gib`, `device_defaults`,
  `quiet_offline`.

A module of its own so that each check holds only its own workload; the checks import it from
beside themselves (their folder is put on `sys.path`), so it travels to the device machine with
the tracked files (benchmarks/gpu_device_run.sh runs the checks from the repository root).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Real configurations (their config.json's shape); random weights.
CONFIGS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "llama-3.2-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "tiny": dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=False),
}
#: Datasheet figures (dense bf16 FLOP/s, memory bytes/s) by a name the device's name contains.
DATASHEET = {"H200": (989e12, 4.8e12), "H100": (989e12, 3.35e12), "A100": (312e12, 2.0e12), "L40S": (362e12, 0.864e12)}
CHAT_TEMPLATE = ("{{ '<|begin_of_text|>' }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
                 "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def say(text: str) -> None:
    print(text, flush=True)


# -- the machine ----------------------------------------------------------------------------------
@dataclass
class Machine:
    device: str
    name: str
    versions: dict[str, str]
    flops: float  # measured dense matrix product in the model's dtype, FLOP/s
    bandwidth: float  # measured device copy, bytes read + written per second
    datasheet: tuple[float, float] | None = None


def free_device(device: str) -> None:
    """What the last system left on the card given back before the next one plans its memory."""
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed(work: Any, device: str) -> float:
    """Seconds of one `work()`: the mean of ten timed runs after three warm-ups."""
    for _ in range(3):
        work()
    sync(device)
    began = time.perf_counter()
    for _ in range(10):
        work()
    sync(device)
    return (time.perf_counter() - began) / 10


def ceilings(device: str, dtype: Any) -> tuple[float, float]:
    """(FLOP/s of a square matrix product in `dtype`, bytes/s of a device copy read + written),
    measured now."""
    import torch

    n, size = (8192, 2 ** 30) if device == "cuda" else (512, 2 ** 24)
    a, b = (torch.randn(n, n, dtype=dtype, device=device) for _ in range(2))
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * n ** 3 / timed(lambda: a @ b, device), 2 * size / timed(lambda: dst.copy_(src), device)


def measure_machine(device: str, dtype: Any) -> Machine:
    """The versions, and the card's ceilings measured now."""
    import torch
    import transformers
    from importlib.metadata import version

    flops, bandwidth = ceilings(device, dtype)
    free_device(device)
    name = torch.cuda.get_device_name() if device == "cuda" else (platform.processor() or platform.machine())
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "cuda": str(torch.version.cuda), "transformers": transformers.__version__, "lceval": version("lceval")}
    sheet = next((v for k, v in DATASHEET.items() if k in name), None) if device == "cuda" else None
    return Machine(device, name, versions, flops, bandwidth, sheet)


# -- the model folder -------------------------------------------------------------------------
def corpus(rng: random.Random, words: int) -> list[str]:
    """Pseudo-words in sentences, digits, and the plain English of RULER's noise haystack."""
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "da", "ve", "zo", "gu", "be", "sha", "tor", "len"]
    vocab = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(words)]
    lines = ["The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
             "One of the special magic numbers for the key is: 1234567. What is the special magic number?",
             " ".join(str(rng.randrange(10 ** 7)) for _ in range(200))]
    for _ in range(400):
        lines.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(6, 18))).capitalize() + ".")
    return lines


def write_folder(folder: Path, config_name: str, dtype: Any, device: str) -> dict[str, Any]:
    """The model folder: config, random weights, the tokenizer trained here, the chat template."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    shape = dict(CONFIGS[config_name])
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus(random.Random(0), 3000),
                            trainers.BpeTrainer(vocab_size=min(4096, shape["vocab_size"]), special_tokens=SPECIALS,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                                eos_token="<|eot_id|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = transformers.LlamaConfig(**shape, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                                      pad_token_id=fast.eos_token_id)
    torch.manual_seed(0)
    began = time.perf_counter()
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    built = time.perf_counter() - began
    began = time.perf_counter()
    model.save_pretrained(folder)
    saved = time.perf_counter() - began
    params = sum(p.numel() for p in model.parameters())
    del model
    free_device(device)
    return {"config": config_name, "parameters": params, "tokenizer_size": len(fast), "build_s": built,
            "save_s": saved, "folder_bytes": sum(p.stat().st_size for p in folder.iterdir())}


# -- the report's figures --------------------------------------------------------------------------
def si(value: float, unit: str) -> str:
    """1.23e14 FLOP/s as "123.0 TFLOP/s": the largest prefix that leaves a number of at least 1."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.1f} {unit}"


def gib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2 ** 30:.1f} GiB"


# -- the device and the process --------------------------------------------------------------------
def device_defaults(args: argparse.Namespace) -> None:
    """--device: cuda when torch sees one, else cpu; --dtype: bfloat16 on cuda, float32 on cpu."""
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")


def quiet_offline() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the model folder is local

