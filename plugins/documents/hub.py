"""Files of a Hugging Face Hub dataset repository at a pinned revision, through
huggingface_hub's cache: fetched when online, read from the cache only when offline
(HF_HUB_OFFLINE / HF_DATASETS_OFFLINE), where a revision the cache lacks is an error naming
it (`DataMissing`: the engine adds the `lceval data fetch` that gets it). `datasets` itself,
offline, would quietly use "the latest cached version" of a dataset whatever its revision;
lceval never asks it to resolve a Hub dataset, only to read files.

A config (`options.source.name`) is resolved the way the Hub declares it: the `configs:` of
the dataset card (README.md) at that revision name the data files of each split, matched
against the repository's files (the Hub's listing when online, the cached snapshot's files
when offline).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

import yaml

from lceval.errors import DataMissing, PackageMissing, UserError
from lceval.io import quote, read_text, unknown_name

#: a revision that pins a commit
COMMIT = 40


#: seconds to wait for the Hub's (or the proxy's) TCP port before calling it unreachable
CONNECT_TIMEOUT_S = 5.0
#: the answer of the one connectivity check a process makes: None = not checked yet
_UNREACHABLE: dict[str, str | None] = {}


def offline() -> bool:
    """The Hub is off limits: HF_HUB_OFFLINE or HF_DATASETS_OFFLINE set (read now, not when
    huggingface_hub was imported, so a command's environment decides)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def unreachable() -> str | None:
    """Why the Hub cannot be reached (no network, no name resolution), or None when it can:
    one TCP connection to its endpoint (or to the HTTPS proxy, when one is set), tried once
    per process. Without it huggingface_hub retries every request five times with back-off
    (24 s of retry lines) before the same answer."""
    import socket
    from urllib.parse import urlsplit

    constants = _hub().constants
    proxy = next((os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy") if os.environ.get(k)),
                 None)
    target = urlsplit(proxy if proxy else constants.ENDPOINT)
    host, port = target.hostname or "", target.port or (443 if target.scheme == "https" else 80)
    key = f"{host}:{port}"
    if key not in _UNREACHABLE:
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            _UNREACHABLE[key] = None
        except OSError as exc:
            _UNREACHABLE[key] = f"{key}: {getattr(exc, 'strerror', None) or exc}"
    if _UNREACHABLE[key] is not None:
        # huggingface_hub read HF_HUB_OFFLINE when it was imported: told now, it asks the
        # network for nothing more (not even the registry it builds its user agent from)
        constants.HF_HUB_OFFLINE = True
    return _UNREACHABLE[key]


def _hub() -> Any:
    """huggingface_hub (installed with `datasets`, the `documents` extra); missing, the error
    says how to install it instead of a traceback."""
    try:
        import huggingface_hub
        import huggingface_hub.constants  # noqa: F401 - `_hub().constants`: a submodule that
        import huggingface_hub.errors  # noqa: F401 - newer releases no longer import on their own
    except ImportError:
        raise PackageMissing("the documents task type reads Hugging Face Hub datasets with huggingface_hub, which is "
                        "not installed", field="options.source.path",
                        install="pip install 'lceval[documents]'") from None
    return huggingface_hub


def _cached_revision(repo: str, revision: str) -> bool:
    """Whether the Hub cache holds anything of `revision` of the dataset repo `repo`."""
    constants = _hub().constants

    root = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
    if len(revision) == COMMIT and (root / "snapshots" / revision).is_dir():
        return True
    return (root / "refs" / revision).is_file()


def hub_file(repo: str, revision: str, filename: str) -> Path:
    """`filename` of the Hub dataset `repo` at `revision`, from the Hub cache (fetched first
    when online). Offline, a revision or file that is not cached is an error naming it."""
    _hub()
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    cut_off = None if offline() else unreachable()
    local_only = offline() or cut_off is not None
    try:
        return Path(hf_hub_download(repo_id=repo, filename=filename, repo_type="dataset", revision=revision,
                                    local_files_only=local_only))
    except LocalEntryNotFoundError:
        if not _cached_revision(repo, revision):
            why = ("the Hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)" if offline()
                   else f"the Hub could not be reached: {cut_off}" if cut_off else "the Hub could not be reached")
            raise DataMissing(f"revision {quote(revision)} of dataset {repo} is not in the local Hugging Face cache "
                              f"and {why}", field="options.source.revision") from None
        raise DataMissing(f"file {quote(filename)} of {repo} at revision {revision} is not in the local Hugging Face "
                          "cache and the Hub cannot be asked", field="options.source.data_files") from None
    except RevisionNotFoundError:
        raise UserError(f"dataset {repo} has no revision {quote(revision)}", field="options.source.revision") from None
    except RepositoryNotFoundError:
        raise UserError(f"no dataset repository {quote(repo)} on the Hugging Face Hub (or it is private)",
                        field="options.source.path") from None
    except EntryNotFoundError:
        raise UserError(f"dataset {repo} has no file {quote(filename)} at revision {revision}",
                        field="options.source.data_files") from None
    except HfHubHTTPError as exc:
        raise UserError(f"the Hugging Face Hub refused {repo}/{filename}@{revision}: {exc}",
                        field="options.source.path") from None


def commit_of(path: Path) -> str | None:
    """The commit a Hub cache path is a snapshot of (`.../snapshots/<commit>/<file>`)."""
    parts = path.parts
    if "snapshots" in parts:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def _card_configs(repo: str, revision: str) -> list[dict[str, Any]]:
    """The `configs:` of the dataset card (README.md's YAML front matter) at `revision`."""
    card = read_text(hub_file(repo, revision, "README.md"), what=f"dataset card of {repo}")
    meta: Any = None
    if card.startswith("---"):
        head, sep, _ = card[3:].partition("\n---")
        if sep:
            try:
                meta = yaml.safe_load(head)
            except yaml.YAMLError as exc:
                raise UserError(f"the dataset card of {repo} has no readable metadata: {exc}",
                                field="options.source.name") from None
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not configs:
        raise UserError(f"the dataset card of {repo} declares no configs", field="options.source.name",
                        hint="Name the files to read with options.source.data_files instead.")
    return [c for c in configs if isinstance(c, dict)]


def _split_patterns(config: dict[str, Any]) -> dict[str, list[str]]:
    """A config's `data_files` as the Hub writes them (a pattern, a list of patterns, or a
    list of {split, path}), by split (plain patterns are the `train` split)."""
    files = config.get("data_files")
    out: dict[str, list[str]] = {}
    for item in files if isinstance(files, list) else [files]:
        if isinstance(item, str):
            out.setdefault("train", []).append(item)
        elif isinstance(item, dict) and isinstance(item.get("split"), str):
            paths = item.get("path")
            out.setdefault(item["split"], []).extend([paths] if isinstance(paths, str) else list(paths or []))
    return out


def repo_files(repo: str, revision: str) -> list[str]:
    """The files of the repository at `revision`: the Hub's listing, or offline the files of
    the cached snapshot."""
    if offline() or unreachable() is not None:
        constants = _hub().constants
        root = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
        commit = revision if len(revision) == COMMIT else None
        ref = root / "refs" / revision
        if commit is None and ref.is_file():
            commit = ref.read_text().strip()
        snapshot = root / "snapshots" / (commit or revision)
        return sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
    _hub()
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return sorted(HfApi().list_repo_files(repo, repo_type="dataset", revision=revision))
    except HfHubHTTPError as exc:
        raise UserError(f"cannot list the files of {repo} at revision {revision}: {exc}",
                        field="options.source.path") from None


def config_files(repo: str, revision: str, name: str | None, split: str) -> list[str]:
    """The repository's files of config `name` (default: the card's default config, or its
    only one) and `split`, from its dataset card."""
    configs = {str(c.get("config_name", "default")): c for c in _card_configs(repo, revision)}
    if name is None:
        defaults = [n for n, c in configs.items() if c.get("default")] or (list(configs) if len(configs) == 1 else [])
        if len(defaults) != 1:
            raise UserError(f"{repo} has several configs ({', '.join(configs)}): name one", field="options.source.name")
        name = defaults[0]
    if name not in configs:
        raise UserError(unknown_name(f"config of {repo}", name, sorted(configs)), field="options.source.name")
    patterns = _split_patterns(configs[name])
    if split not in patterns:
        raise UserError(unknown_name(f"split of {repo} config {name!r}", split, sorted(patterns)),
                        field="options.source.split")
    files = repo_files(repo, revision)
    matched = [f for f in files if any(fnmatch.fnmatchcase(f, p) for p in patterns[split])]
    if not matched:
        raise UserError(f"no file of {repo} at revision {revision} matches config {name!r} split {split!r} "
                        f"({quote(patterns[split])})", field="options.source.split")
    return matched
