"""Stopping a streaming DataLoader mid-epoch and resuming it, for the exact-resume tests."""

from __future__ import annotations

from collections.abc import Callable


def ids(batches) -> list[int]:
    return [int(v) for batch in batches for v in batch["idx"]]


def stop_and_resume(make_stream: Callable, *, stop_after: int, batch_size: int,
                    num_workers: int = 2) -> tuple[list[int], list[int], dict]:
    """Row ids read before a loader's state is saved, the ids a fresh stream resumed from it reads, and the
    state. An exact resume means head + rest equals one uninterrupted epoch."""
    from stable_datasets.streaming import StreamingDataLoader

    loader = StreamingDataLoader(make_stream(), batch_size=batch_size, num_workers=num_workers)
    iterator = iter(loader)
    head = ids([next(iterator) for _ in range(stop_after)])
    state = loader.state_dict()
    del iterator
    resumed = make_stream()
    resumed.load_state_dict(state)
    return head, ids(StreamingDataLoader(resumed, batch_size=batch_size, num_workers=num_workers)), state
