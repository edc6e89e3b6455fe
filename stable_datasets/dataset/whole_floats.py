"""Whole floats a `map` returns for an integer column, kept as that column's ints, as Hugging Face keeps them.

HF's writer first tries to store a map's output column as the input column's type; Arrow takes floats for an
integer type when each is whole (`1.0`), and refuses a fraction, NaN or a value out of range. So `1.0` for a
ClassLabel, `[1.0, 2.0]` for a `Sequence(Value("int64"))`, `[[1.0]]` for a list of lists, `{"a": [1.0]}` for a
struct of int lists keep their feature, and a fraction anywhere in the column makes it float. Here the same
question is asked of Arrow on whole columns: the values as one Arrow array, is its type the column's type with
floats where the column has ints, and does a safe cast to the column's type succeed."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from stable_datasets.arrow.types import is_list_type


def ints_as_floats(given: pa.DataType, target: pa.DataType) -> bool | None:
    """True when `given` is `target` but for floats where `target` has integers (at least one such leaf); False
    when nothing differs that a cast would change (equal, or no values); None when they differ otherwise."""
    if given == target or pa.types.is_null(given):
        return False
    if pa.types.is_floating(given) and pa.types.is_integer(target):
        return True
    if pa.types.is_integer(given) and pa.types.is_integer(target):
        return False  # (the range is the safe cast's to check)
    if is_list_type(given) and is_list_type(target):
        return ints_as_floats(given.value_type, target.value_type)
    if pa.types.is_struct(given) and pa.types.is_struct(target):
        names = {given.field(i).name for i in range(given.num_fields)}
        if names != {target.field(i).name for i in range(target.num_fields)}:
            return None
        answers = [ints_as_floats(given.field(name).type, target.field(name).type) for name in sorted(names)]
        return None if None in answers else any(answers)
    return None


def as_column_type(values: list[Any], target: pa.DataType) -> list[Any] | None:
    """`values` (one column's cells) with whole floats made the ints of `target` (see the module docstring): the
    cast values; `values` themselves when they hold no float where `target` has ints; None when they differ from
    `target` otherwise or a float is no whole number in range. One Arrow array and one safe cast per column."""
    try:
        given = pa.array(values)
    except (pa.ArrowException, ValueError, TypeError):
        return None
    floats = ints_as_floats(given.type, target)
    if not floats:
        return None if floats is None else values
    try:
        return given.cast(target, safe=True).to_pylist()
    except (pa.ArrowException, ValueError, TypeError):
        return None


def narrow_rows(rows: list[dict[str, Any]], targets: dict[str, pa.DataType]) -> None:
    """Whole floats in `rows` made the ints of their column (`targets`: column -> its type), in place, a column at a
    time. A column that does not cast as a whole is narrowed row by row, so that the rows that fit are stored and
    the encoder names the first row that does not (a fraction after the first rows)."""
    for name, target in targets.items():
        holding = [row for row in rows if name in row]
        if not holding:
            continue
        cast = as_column_type([row[name] for row in holding], target)
        if cast is None:  # (the error path only: some row does not fit)
            cast = [(as_column_type([row[name]], target) or [row[name]])[0] for row in holding]
        for row, value in zip(holding, cast):
            row[name] = value
