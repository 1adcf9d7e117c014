"""A model of a run, built from its resolved spec on first use and closed once. Only the
`Session` makes them (`lceval.engine._session`): it decides when a model opens and closes."""

from __future__ import annotations

from lceval.engine._model_spec import ModelSpec
from lceval.interfaces import ModelBackend


def open_backend(spec: ModelSpec) -> ModelBackend:
    """The backend of a resolved spec (its options were checked when it was resolved)."""
    if spec.factory is None:
        raise ValueError(f"model spec '{spec.text}' was not resolved against the installed backends")
    return spec.factory(spec.model, dict(spec.checked))


class ModelHandle:
    """One model of a run, built on first use and closed once. A task type may ask for its
    tokenizer while the run's data is read (a synthetic task builds each context to a length
    in the model's own tokens); generation then uses the same backend, so the model loads
    once, and a run whose task types never ask loads it only after its data is read."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._backend: ModelBackend | None = None

    @property
    def built(self) -> bool:
        return self._backend is not None

    def backend(self) -> ModelBackend:
        if self._backend is None:
            self._backend = open_backend(self.spec)
        return self._backend

    def tokenizer(self) -> ModelBackend | None:
        """The backend when it lends a tokenizer (`tokenize` gives ids), else None."""
        backend = self.backend()
        return backend if backend.tokenize("lceval") is not None else None

    def close(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            backend.close()
