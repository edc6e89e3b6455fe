"""Where `files_identity` was documented before identity/ held it: builder scripts that import it from here
keep working (their `_fingerprint_extra`; docs/caches-and-fingerprints.md names the new place)."""

from stable_datasets.identity.inputs import files_identity

__all__ = ["files_identity"]
