"""A stand-in for kvpress's head-wise presses, for tests without kvpress (it pins its own
transformers, so it lives in a venv of its own): `AdaKVPress(press)` keeps every position in
the cache and, as kvpress's AdaKVPress does (`kvpress/presses/adakv_press.py`), leaves on each
attention module `masked_key_indices` = (batch, key/value head, position) index tensors of the
entries it masks: `int(n * (1 - ratio))` of a layer's `n` positions kept per head on average,
masked unevenly over the heads (head 0 loses the most), as a head-wise budget does. Nothing is
masked in attention here: only what lceval reports of the masks is tested."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class SnapKVPress:
    window_size: int = 64
    kernel_size: int = 5
    compression_ratio: float = 0.0


@dataclass
class AdaKVPress:
    press: SnapKVPress

    @property
    def compression_ratio(self) -> float:
        return self.press.compression_ratio

    @compression_ratio.setter
    def compression_ratio(self, value: float) -> None:
        self.press.compression_ratio = value

    @contextmanager
    def __call__(self, model):
        attention = [m for m in model.modules() if type(m).__name__.endswith("Attention")]
        hooks = [m.register_forward_hook(self._mask, with_kwargs=True) for m in attention]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()

    def _mask(self, module, args, kwargs, output):
        import torch

        hidden = kwargs.get("hidden_states", args[0] if args else None)
        n = int(hidden.shape[1])
        heads = int(module.config.num_key_value_heads)
        pruned = heads * (n - int(n * (1 - self.compression_ratio)))
        # head 0 first, then the others: an uneven, head-wise share
        order = [(h, p) for h in range(heads) for p in range(n)][:pruned]
        module.masked_key_indices = (torch.zeros(pruned, dtype=torch.long),
                                     torch.tensor([h for h, _ in order], dtype=torch.long),
                                     torch.tensor([p for _, p in order], dtype=torch.long))
        return output
