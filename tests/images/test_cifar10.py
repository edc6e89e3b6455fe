"""CIFAR-10 from a miniature binary archive under the official URL."""

from __future__ import annotations

import numpy as np

from stable_datasets.images import CIFAR10
from tests.fixtures.catalog import colour, digit_images, serve_urls, tar_bytes

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
BATCHES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def test_cifar10_rows_in_official_order_whatever_the_member_order(monkeypatch):
    gray, labels = digit_images(12, 32)
    rgb = colour(gray)
    records = {}
    for i, name in enumerate(BATCHES):
        part = slice(2 * i, 2 * i + 2)
        planes = rgb[part].transpose(0, 3, 1, 2).reshape(2, -1)
        records[f"cifar-10-batches-bin/{name}"] = np.concatenate([labels[part, None], planes], 1).tobytes()
    shuffled = dict(reversed(list(records.items())))  # members stored out of order
    with serve_urls(monkeypatch, {URL: tar_bytes(shuffled)}) as server:
        both = CIFAR10(verification_mode="no_checks")
        assert server.hits("/www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz") == 1  # one download, two splits
    train, test = both["train"], both["test"]
    assert (len(train), len(test)) == (10, 2)
    np.testing.assert_array_equal(train[5]["image"], rgb[5])
    np.testing.assert_array_equal(test[1]["image"], rgb[11])
    assert train["label"] == labels[:10].tolist()
    assert train.features["label"].names[0] == "airplane"
