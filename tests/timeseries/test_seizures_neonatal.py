"""SeizuresNeonatal from 79 miniature EDF files and an annotations_2017.mat (MATLAB v5) at the official URLs; the EDF
reader's volts are checked against values computed from the written digital samples (they equal MNE's
read_raw_edf(...).get_data(), checked once by hand with MNE 1.13)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.io

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError
from stable_datasets.timeseries import SeizuresNeonatal
from stable_datasets.timeseries._edf import read_edf
from tests.fixtures.catalog import serve_urls

BASE = "https://zenodo.org/record/2547147/files/"
LABELS = ["EEG Fp1-REF", "EEG Cz-REF", "ECG EKG"]
UNITS, PMIN, PMAX = ["uV", "uV", "mV"], [-3276.8, -1000.0, -5.0], [3276.7, 1000.0, 5.0]


def edf_bytes(digital: np.ndarray, per_record: int = 4, extra_signal: tuple[str, int] | None = None) -> bytes:
    """An EDF file of int16 `digital` [T, C] (C = 3: two µV EEG signals and a mV ECG), T a multiple of per_record."""
    frames, channels = digital.shape
    records = frames // per_record
    labels, units, pmin, pmax, counts = list(LABELS), list(UNITS), list(PMIN), list(PMAX), [per_record] * channels
    if extra_signal is not None:
        labels, units, counts = [*labels, extra_signal[0]], [*units, ""], [*counts, extra_signal[1]]
        pmin, pmax = [*pmin, -1], [*pmax, 1]

    def field(value, width):
        return str(value).ljust(width)[:width].encode("latin-1")

    n = len(labels)
    head = (field(0, 8) + field("X X X X", 80) + field("Startdate X X X X", 80) + field("01.01.18", 8)
            + field("00.00.00", 8) + field(256 + 256 * n, 8) + field("", 44) + field(records, 8) + field(1, 8)
            + field(n, 4))
    columns = [(labels, 16), ([""] * n, 80), (units, 8), (pmin, 8), (pmax, 8), ([-32768] * n, 8), ([32767] * n, 8),
               ([""] * n, 80), (counts, 8), ([""] * n, 32)]
    signal_headers = b"".join(field(v, w) for values, w in columns for v in values)
    body = bytearray()
    for r in range(records):
        body += digital[r * per_record:(r + 1) * per_record].T.astype("<i2").tobytes()
        if extra_signal is not None:
            body += np.zeros(extra_signal[1], "<i2").tobytes()
    return head + signal_headers + bytes(body)


def volts(digital: np.ndarray) -> np.ndarray:
    gain = (np.array(PMAX) - np.array(PMIN)) / 65535
    scale = np.array([1e-6, 1e-6, 1e-3])
    return (((digital.astype(np.float64) + 32768) * gain + np.array(PMIN)) * scale).astype(np.float32)


def test_edf_reader_gives_volts_and_refuses_mixed_rates(tmp_path):
    digital = np.random.default_rng(0).integers(-32768, 32767, size=(40, 3)).astype(np.int16)
    (tmp_path / "a.edf").write_bytes(edf_bytes(digital))
    series, labels, rate = read_edf(tmp_path / "a.edf")
    assert labels == LABELS and rate == 4.0 and series.dtype == np.float32
    np.testing.assert_array_equal(series, volts(digital))
    (tmp_path / "b.edf").write_bytes(edf_bytes(digital, extra_signal=("EDF Annotations", 6)))
    np.testing.assert_array_equal(read_edf(tmp_path / "b.edf")[0], volts(digital))  # annotations left out
    (tmp_path / "c.edf").write_bytes(edf_bytes(digital, extra_signal=("Resp", 2)))
    with pytest.raises(StableDatasetsError, match="different sampling rates"):
        read_edf(tmp_path / "c.edf")


def test_seizures_neonatal_a_row_per_subject(monkeypatch, tmp_path):
    rng = np.random.default_rng(1)
    digital = {i: rng.integers(-2000, 2000, size=(4 * (1 + i % 3), 3)).astype(np.int16) for i in range(1, 80)}
    marks = np.empty((1, 79), dtype=object)
    for i in range(79):
        marks[0, i] = (rng.random((3, 1 + (i + 1) % 3)) < 0.5).astype(np.uint8)
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"annotat_new": marks})
    files = {BASE + "annotations_2017.mat?download=1": buf.getvalue()}
    files.update({BASE + f"eeg{i}.edf?download=1": edf_bytes(digital[i]) for i in digital})
    with serve_urls(monkeypatch, files):
        ds = SeizuresNeonatal(split="train", processed_cache_dir=str(tmp_path))  # the row count is checked too
        same = sds.load_dataset("seizures_neonatal", split="train", cache_dir=str(tmp_path),
                                verification_mode="no_checks")
    assert len(ds) == 79 and ds["subject_id"] == list(range(1, 80))
    assert ds["filename"][0] == "eeg1.edf" and ds["filename"][-1] == "eeg79.edf"
    for i in (1, 2, 79):
        np.testing.assert_array_equal(np.asarray(ds[i - 1]["series"], dtype=np.float32), volts(digital[i]))
        assert ds[i - 1]["annotations"] == marks[0, i - 1].astype(np.int32).tolist()
    assert same["subject_id"] == ds["subject_id"]
