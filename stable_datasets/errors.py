"""Exceptions with enough context (builder, split, example key, field, file) to act on."""

from __future__ import annotations


class StableDatasetsError(Exception):
    """Base class for every error this library raises on purpose."""


class EncodingError(StableDatasetsError, ValueError):
    """A value does not fit its feature. `field` is the dotted path inside the example."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"field '{field}': {message}" if field else message)

    def __reduce__(self):  # crosses process boundaries (num_proc workers) intact
        return type(self), (self.field, self.message)


class ExampleError(StableDatasetsError, ValueError):
    """An example from a builder could not be encoded; names builder, split, key and field."""

    def __init__(self, builder: str, split: str, key: object, field: str | None, message: str):
        self.builder, self.split, self.key, self.field = builder, split, key, field
        where = f"builder '{builder}', split '{split}', example key {key!r}"
        if field:
            where += f", field '{field}'"
        self.message = message
        super().__init__(f"{where}: {message}")

    def __reduce__(self):
        return type(self), (self.builder, self.split, self.key, self.field, self.message)


class UnknownSplitError(StableDatasetsError, ValueError):
    """A split the builder does not make; the message lists the ones it makes."""


class SplitRowsError(StableDatasetsError, ValueError):
    """A build yielded another number of rows than the builder's info promises for that split."""


class ManualDownloadError(StableDatasetsError, FileNotFoundError):
    """Data behind a login: the message says what to download, where to put it, and which argument names it."""


class ColumnNotFoundError(StableDatasetsError, KeyError, ValueError):
    """A column name the dataset does not have; the message lists the columns it has. A KeyError as
    Python's mappings raise, and a ValueError as Hugging Face `datasets` raises, so either catch works."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class CacheError(StableDatasetsError):
    """A cache directory is missing, stale, truncated or otherwise unusable."""


class InputChangedError(StableDatasetsError):
    """An input file changed while a build read it: its rows would mix two versions of the file."""


class CorruptCellError(CacheError, ValueError):
    """A stored cell that cannot be decoded (an image whose bytes were damaged on disk)."""


class ConfigurationError(StableDatasetsError, ValueError):
    """An environment variable or setting that has an unusable value; the message names it."""


class ResourceLimitError(StableDatasetsError, MemoryError):
    """The system refused a resource at one of its limits (the kernel's memory maps, the address space): the
    message names the limit and the setting that bounds what the library takes. Nothing stored is damaged."""


class ChecksumError(StableDatasetsError):
    """A downloaded file does not have the expected sha256."""


class DownloadError(StableDatasetsError):
    """A file could not be downloaded from any of its URLs."""


class BuilderNotFoundError(StableDatasetsError, FileNotFoundError):
    """No builder matches a name; the message lists the closest registered names."""


class WorkerDiedError(StableDatasetsError):
    """A worker process or Ray task died while writing a part; the next build resumes."""


class LockTimeoutError(StableDatasetsError, TimeoutError):
    """Another process held a cache or download lock for longer than the timeout."""


class StorageError(CacheError):
    """An object store refused or could not serve a request; the message names the URL and what to set."""


class MissingObjectError(StorageError):
    """The object asked for is not in the store (deleted, or never written)."""


class MissingExtraError(StableDatasetsError, ImportError):
    """An optional package is missing: the message names the extra that installs it."""


def missing_extra(what: str, package: str, extra: str) -> MissingExtraError:
    """`what` needs `package`, installed by `pip install 'stable-datasets[extra]'`."""
    return MissingExtraError(f"{what} needs {package}: pip install 'stable-datasets[{extra}]'")


def add_note(exc: BaseException, note: str) -> None:
    """A line a traceback shows under the message of an exception from user code (its type kept)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10: kept on the exception, as 3.11 keeps it
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]


class StateError(StableDatasetsError, ValueError):
    """A saved stream or sampler state that cannot be resumed (foreign, partial, edited, or saved over other data):
    the message says which key and why. A ValueError, as a bad argument is."""


class SeedError(StableDatasetsError, ValueError):
    """A shuffle or mix seed outside the one accepted range (`streaming.seeds.check_seed`)."""
