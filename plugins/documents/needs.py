"""What a spec of the documents family needs on disk (`TaskType.needs`), and the needs that
live in caches outside the data home: files of a Hugging Face Hub dataset at a pinned revision,
a model's snapshot (a judge's NLI model, a tokenizer), and a tiktoken encoding file.

Each is present when the library that reads it would find it with the network off, fetched
with that library's own download (so it lands where that library looks), and packed as the
files of its cache (`lceval data pack`): a Hub file as `datasets--OWNER--NAME/snapshots/COMMIT/
FILE` under the Hub cache (plus `refs/REVISION` when the revision is a branch), an encoding as
the file tiktoken names by the sha1 of its URL under its cache folder.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, PackageMissing, UserError
from lceval.interfaces import TaskContext
from lceval.io import DataHomePath, remote_size
from lceval.needs import Need

from .hub import COMMIT, _hub, commit_of, config_files, offline, unreachable

WEIGHTS_ELSEWHERE = ["*.h5", "*.msgpack", "*.ot", "flax_model*", "tf_model*", "rust_model*", "*.onnx", "onnx/*",
                     "openvino/*", "coreml/*"]
#: the files `AutoTokenizer.from_pretrained` reads (a tokenizer without the model's weights)
TOKENIZER_FILES = ["tokenizer*", "special_tokens_map.json", "config.json", "*.model", "vocab*", "merges.txt",
                   "added_tokens.json", "generation_config.json"]
DATA_HOME_ADVICE = "the files the spec reads (its docs page says where to get them)"


def _installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("huggingface_hub") is not None
    except ImportError:
        return False


def _hub_root() -> Path:
    return Path(_hub().constants.HF_HUB_CACHE)


def _repo_folder(repo: str, repo_type: str) -> str:
    return f"{repo_type}s--{repo.replace('/', '--')}"


class HubFile(Need):
    """One file of a Hub dataset repository at a pinned revision, in the Hub cache."""

    def __init__(self, repo: str, revision: str, filename: str, repo_type: str = "dataset") -> None:
        self.repo, self.revision, self.filename, self.repo_type = repo, revision, filename, repo_type
        self.key = f"hub:{repo_type}:{repo}@{revision}:{filename}"
        self.label = f"{repo} {filename} at {revision[:10]} (Hugging Face Hub)"

    def root(self) -> Path:
        return _hub_root()

    def _cached(self) -> Path | None:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(self.repo, self.filename, revision=self.revision, repo_type=self.repo_type)
        return Path(found) if isinstance(found, str) and Path(found).is_file() else None

    def missing(self) -> str | None:
        if not _installed():
            _hub()  # PackageMissing: the task's status says to install it, not to fetch
        return None if self._cached() else (f"{self.repo} {self.filename} at revision {self.revision[:10]} is not in "
                                            f"the Hugging Face cache {_hub_root()}")

    def size(self) -> int | None:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        if offline():  # the network is off: nothing is asked, not even a size
            return None
        from huggingface_hub import HfApi

        try:
            found = HfApi().get_paths_info(self.repo, [self.filename], revision=self.revision, repo_type=self.repo_type)
        except Exception:  # noqa: BLE001 - a size is a courtesy; the download says what is wrong
            return None
        return next((getattr(f, "size", None) for f in found), None)

    def fetch(self, source: Path | None) -> None:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        if offline() or unreachable() is not None:
            raise UserError(f"cannot download {self.repo} {self.filename}: the Hub is "
                            + ("offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)" if offline() else
                               f"unreachable ({unreachable()})"))
        try:
            hf_hub_download(repo_id=self.repo, filename=self.filename, repo_type=self.repo_type, revision=self.revision)
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise UserError(f"cannot download {self.repo} {self.filename} at {self.revision}: {exc}") from None

    def files(self) -> list[str]:
        path = self._cached()
        if path is None:
            return []
        folder = _repo_folder(self.repo, self.repo_type)
        commit = commit_of(path) or self.revision
        out = [f"{folder}/snapshots/{commit}/{self.filename}"]
        if len(self.revision) != COMMIT or self.revision != commit:
            out.append(f"{folder}/refs/{self.revision}")
        return out


class HubSnapshot(Need):
    """A model repository of the Hub (a judge's NLI model, a tokenizer), as `transformers`
    loads it by name: its snapshot at `revision` (default: the main branch) in the Hub cache,
    without the weights of other frameworks."""

    def __init__(self, repo: str, revision: str | None = None, repo_type: str = "model",
                 only: list[str] | None = None) -> None:
        self.repo, self.revision, self.repo_type, self.only = repo, revision or "main", repo_type, only
        self.key = f"hub-snapshot:{repo_type}:{repo}@{self.revision}" + (f":{','.join(only)}" if only else "")
        self.label = f"{repo_type} {repo} at {self.revision[:10]}{' (tokenizer)' if only else ''} (Hugging Face Hub)"

    def root(self) -> Path:
        return _hub_root()

    def _snapshot(self) -> Path | None:
        base = _hub_root() / _repo_folder(self.repo, self.repo_type)
        ref = base / "refs" / self.revision
        commit = ref.read_text().strip() if ref.is_file() else self.revision
        folder = base / "snapshots" / commit
        return folder if folder.is_dir() and any(folder.iterdir()) else None

    def missing(self) -> str | None:
        if not _installed():
            _hub()  # PackageMissing: the task's status says to install it, not to fetch
        return None if self._snapshot() else f"{self.repo} is not in the Hugging Face cache {_hub_root()}"

    def _ignore(self) -> list[str]:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        from huggingface_hub import HfApi

        names = HfApi().list_repo_files(self.repo, repo_type=self.repo_type, revision=self.revision)
        return WEIGHTS_ELSEWHERE + (["*.bin", "*.pt", "*.pth"] if any(n.endswith(".safetensors") for n in names) else [])

    def size(self) -> int | None:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        if offline():  # the network is off: nothing is asked, not even a size
            return None
        from huggingface_hub import snapshot_download

        try:
            planned = snapshot_download(self.repo, repo_type=self.repo_type, revision=self.revision,
                                        allow_patterns=self.only, ignore_patterns=self._ignore(), dry_run=True)
        except Exception:  # noqa: BLE001 - a size is a courtesy
            return None
        return sum(int(getattr(f, "file_size", 0) or 0) for f in planned if getattr(f, "will_download", True))

    def fetch(self, source: Path | None) -> None:
        _hub()  # not installed: PackageMissing (exit 4), not a ModuleNotFoundError
        from huggingface_hub import snapshot_download

        if offline() or unreachable() is not None:
            raise UserError(f"cannot download {self.repo}: the Hub is offline or unreachable")
        try:
            snapshot_download(self.repo, repo_type=self.repo_type, revision=self.revision, allow_patterns=self.only,
                              ignore_patterns=self._ignore())
        except Exception as exc:  # noqa: BLE001 - gated, missing, network: said in one line
            raise UserError(f"cannot download {self.repo}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                            hint="A gated model needs its licence accepted and `hf auth login` once.") from None

    def files(self) -> list[str]:
        snapshot = self._snapshot()
        if snapshot is None:
            return []
        root = _hub_root()
        out = sorted(p.relative_to(root).as_posix() for p in snapshot.rglob("*") if p.is_file())
        ref = snapshot.parent.parent / "refs" / self.revision
        return out + ([ref.relative_to(root).as_posix()] if ref.is_file() else [])


#: encodings whose file is another's (tiktoken_ext.openai_public)
_FILE_OF = {"o200k_harmony": "o200k_base", "p50k_edit": "p50k_base"}
TIKTOKEN_BASE = "https://openaipublic.blob.core.windows.net/encodings"


class TiktokenEncoding(Need):
    """A tiktoken encoding's BPE file (o200k_base, cl100k_base ...), which tiktoken downloads at
    first use into its cache folder ($TIKTOKEN_CACHE_DIR, else $DATA_GYM_CACHE_DIR, else
    data-gym-cache in the temporary folder) under the sha1 of its URL."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.url = f"{TIKTOKEN_BASE}/{_FILE_OF.get(name, name)}.tiktoken"
        self.key = f"tiktoken:{_FILE_OF.get(name, name)}"
        self.label = f"tiktoken encoding {name}"

    def root(self) -> Path:
        for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
            if var in os.environ:
                return Path(os.environ[var])
        return Path(tempfile.gettempdir()) / "data-gym-cache"

    def _file(self) -> str:
        return hashlib.sha1(self.url.encode()).hexdigest()

    def missing(self) -> str | None:
        if str(self.root()) in ("", "."):
            return "TIKTOKEN_CACHE_DIR is empty, which turns tiktoken's cache off"
        return None if (self.root() / self._file()).is_file() else \
            f"tiktoken's {self.name} file is not in its cache {self.root()} (set TIKTOKEN_CACHE_DIR to keep it)"

    def size(self) -> int | None:
        return remote_size(self.url)

    def fetch(self, source: Path | None) -> None:
        try:
            import tiktoken
        except ImportError:
            raise PackageMissing(f"the {self.name} encoding needs tiktoken, which is not installed",
                                 install="pip install 'lceval[documents]'") from None
        if offline():
            raise UserError(f"cannot download tiktoken's {self.name}: the network is off here (HF_HUB_OFFLINE / "
                            "HF_DATASETS_OFFLINE)")
        try:
            tiktoken.get_encoding(self.name)
        except Exception as exc:  # noqa: BLE001 - network, or an unknown name: one line
            raise UserError(f"tiktoken could not download {self.name}: {type(exc).__name__}") from None

    def files(self) -> list[str]:
        return [self._file()] if (self.root() / self._file()).is_file() else []


def tiktoken_encoding(name: str, field: str, instead: str) -> Any:
    """tiktoken's encoding `name`; its file not in the cache and not downloadable (offline) is a
    `DataMissing` naming the cache folder (`instead`: what else the user can do), not a
    connection error's text. Not installed or an unknown name: a UserError."""
    need = TiktokenEncoding(name)
    try:
        import tiktoken
    except ImportError:
        raise PackageMissing(f"counting in {name} tokens needs tiktoken, which is not installed", field=field,
                             install="pip install 'lceval[documents]'",
                             hint=f"pip install 'lceval[documents]' (it has tiktoken), or {instead}") from None
    absent = need.missing()
    if absent is not None and offline():
        raise DataMissing(f"{absent}, and the network is off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE).", field=field,
                          hint=f"Or {instead}")
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise UserError(f"tiktoken has no encoding {name!r}: {exc}", field=field) from None
    except Exception as exc:  # noqa: BLE001 - the download of the encoding's file failed
        raise DataMissing(f"{absent or 'its file is not in the cache'}, and tiktoken could not download it "
                          f"({type(exc).__name__}).", field=field, hint=f"Or {instead}") from None


def model_need(name: str, only: list[str] | None = None) -> list[Need]:
    """A model a judge or a task type loads by name: the Hub snapshot, unless `name` is a local
    folder (the user's, present as it is)."""
    return [] if Path(name).expanduser().exists() or ":" in name else [HubSnapshot(name, only=only)]


def _entries(source: dict[str, Any]) -> list[str]:
    files = source.get("data_files") or []
    return [files] if isinstance(files, str) else [str(f) for f in files]


def _outer(entry: str) -> str:
    head, sep, last = entry.rpartition("::")
    return last if sep else entry


def source_needs(source: dict[str, Any], ctx: TaskContext) -> list[Need]:
    """The Hub files (at the pinned revision) or the data-home files a `source` reads; a local
    file beside the spec or given by an absolute path is the user's, not a need."""
    repo, revision = source.get("path"), source.get("revision")
    if repo:
        if not revision:
            return []  # reported by the check: a Hub source needs a pinned revision
        entries = _entries(source)
        if not entries:  # a config of the dataset card: the card, then the files it names
            card = HubFile(repo, revision, "README.md")
            if card.missing() is not None and (not _installed() or offline() or unreachable() is not None):
                return [card]
            entries = config_files(repo, revision, source.get("name"), source.get("split") or "train")
            return [card, *(HubFile(repo, revision, e) for e in entries)]
        return [HubFile(repo, revision, _outer(e)) for e in entries]
    out: list[Need] = []
    for entry in _entries(source):
        outer = _outer(entry)
        if Path(outer).expanduser().is_absolute() or (ctx.spec_path.parent / outer).exists():
            continue
        out.append(DataHomePath(outer, ctx.data_home, DATA_HOME_ADVICE))
    return out
