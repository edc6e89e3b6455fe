"""EDF (European Data Format) recordings, read with numpy: the ASCII header, then the data records as int16 through a
memory map, each signal scaled from digital to physical values and then to volts, as MNE's `read_raw_edf(...)
.get_data()` gives them (a µV signal times 1e-6, mV times 1e-3, any other unit as it is). EDF+ annotation signals are
left out; the other signals must share one sampling rate (MNE would resample them)."""

from __future__ import annotations

import os

import numpy as np

from stable_datasets.errors import StableDatasetsError

#: physical dimensions MNE converts to volts (micro in its three spellings, milli)
_UNIT_SCALE = {"uV": 1e-6, "\u00b5V": 1e-6, "\u03bcV": 1e-6, "mV": 1e-3}
_ANNOTATIONS = "EDF Annotations"


def _fields(raw: bytes, count: int, width: int) -> list[str]:
    return [raw[i * width:(i + 1) * width].decode("latin-1").strip() for i in range(count)]


def read_edf(path: str | os.PathLike) -> tuple[np.ndarray, list[str], float]:
    """(float32 `[T, C]` in volts, channel labels, samples per second) of one EDF file."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        head = fh.read(256)
        if len(head) < 256:
            raise StableDatasetsError(f"{path}: not an EDF file (header of {len(head)} bytes)")
        try:
            header_bytes, records = int(head[184:192]), int(head[236:244])
            duration, signals = float(head[244:252]), int(head[252:256])
        except ValueError:
            raise StableDatasetsError(f"{path}: not an EDF file (unreadable header)") from None
        raw = fh.read(signals * 256)
    widths = [("label", 16), ("transducer", 80), ("unit", 8), ("physical_min", 8), ("physical_max", 8),
              ("digital_min", 8), ("digital_max", 8), ("prefilter", 80), ("samples", 8), ("reserved", 32)]
    fields, offset = {}, 0
    for name, width in widths:
        fields[name] = _fields(raw[offset:], signals, width)
        offset += signals * width
    samples = np.array([int(s) for s in fields["samples"]])
    record_len = int(samples.sum())
    if records < 0:  # "-1": unknown while recording; count what the file holds
        records = (os.path.getsize(path) - header_bytes) // (2 * record_len)
    keep = [i for i, label in enumerate(fields["label"]) if label != _ANNOTATIONS]
    if len({int(samples[i]) for i in keep}) != 1:
        raise StableDatasetsError(f"{path}: signals of different sampling rates are not supported")
    data = np.memmap(path, dtype="<i2", mode="r", offset=header_bytes, shape=(records, record_len))
    starts = np.concatenate([[0], np.cumsum(samples)])
    per_record = int(samples[keep[0]])
    out = np.empty((records * per_record, len(keep)), dtype=np.float32)
    for column, i in enumerate(keep):
        pmin, pmax = float(fields["physical_min"][i]), float(fields["physical_max"][i])
        dmin, dmax = float(fields["digital_min"][i]), float(fields["digital_max"][i])
        gain = (pmax - pmin) / (dmax - dmin)
        digital = np.asarray(data[:, starts[i]:starts[i + 1]], dtype=np.float64).reshape(-1)
        out[:, column] = ((digital - dmin) * gain + pmin) * _UNIT_SCALE.get(fields["unit"][i], 1.0)
    del data
    return out, [fields["label"][i] for i in keep], per_record / duration
