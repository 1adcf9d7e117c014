"""What a task needs on disk: the contract of `lceval data status / fetch / pack / unpack`.

A task type declares, from its spec alone, the things a run of it will read besides the spec
(`lceval.interfaces.TaskType.needs`): a dataset, files of a Hugging Face dataset at a pinned
revision, authors' files at their commit, an encoding, a judge's model. Each is a `Need`: enough
to tell whether it is here and usable with the network off, to get it on a connected machine,
and to carry its files to one without network. `lceval.io` has the data home's (`DatasetNeed`,
`DataHomePath`, `GitFiles`); docs: "Running on a cluster without internet".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

__all__ = ["Need"]


class Need(ABC):
    """One thing a task needs on disk (declared by `TaskType.needs`): enough to tell whether it
    is here, to get it on a connected machine, and to carry its files to one without network
    (`lceval data pack` / `unpack`)."""

    #: identity: two tasks needing the same thing share it (it is fetched and packed once)
    key: str = ""
    #: what it is, for people ("THUDM/LongBench data.zip at 5e628be4, Hugging Face Hub")
    label: str = ""
    #: None: a fetch downloads it; else only `--from FOLDER` installs it and this says where
    #: that folder comes from (data that may not be redistributed, or has no pinned checksum)
    from_folder: str | None = None
    #: the command that installs it alone, when it has one (`lceval data fetch elitr-bench`);
    #: None: the task's family fetch (`lceval data fetch FAMILY`) gets it
    command: str | None = None

    @abstractmethod
    def root(self) -> Path:
        """The folder its files live under on this machine (the data home, a cache), read
        when asked (environment variables included): `unpack` installs them there."""

    @abstractmethod
    def missing(self) -> str | None:
        """None when it is here and usable with the network off; else what is missing. A
        `lceval.errors.PackageMissing` when the library that reads it is not installed: the
        task then needs that installed first, not a fetch."""

    def size(self) -> int | None:
        """Bytes a fetch would download, asked without downloading; None when unknown."""
        return None

    @abstractmethod
    def fetch(self, source: Path | None) -> None:
        """Make it present: copy it from the folder `source` (`--from`) when that holds it, else
        download it; a `UserError` says why not."""

    @abstractmethod
    def files(self) -> list[str]:
        """Its files, relative to `root()`, once present; the one whose presence marks it
        complete last (`unpack` installs them in this order)."""
