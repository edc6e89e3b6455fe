"""Every registered layout module keeps the module contract, and every backend kind keeps the backend
contract (layouts/contract.py): a missing ability would otherwise surface as an AttributeError mid-epoch."""

from __future__ import annotations

import inspect

import pytest

from stable_datasets.dataset.column_view import ColumnView
from stable_datasets.layouts import LAYOUTS, layout_module
from stable_datasets.layouts.base import LayoutBackend
from stable_datasets.layouts.contract import Backend, LayoutModule
from stable_datasets.storage.remote_stream import RemoteShards

MODULE_MEMBERS = [name for name in LayoutModule.__annotations__] + ["check_options", "merge_parts", "seal_part"]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_layout_module_has_every_member_of_the_module_contract(name):
    module = layout_module(name)
    missing = [member for member in MODULE_MEMBERS if not hasattr(module, member)]
    assert missing == []
    assert name == module.NAME
    assert isinstance(module.DEFAULT_OPTIONS, dict)
    module.check_options(dict(module.DEFAULT_OPTIONS))  # the defaults are valid options
    assert issubclass(module.Backend, LayoutBackend)


@pytest.mark.parametrize("backend", [*(layout_module(n).Backend for n in sorted(LAYOUTS)), ColumnView, RemoteShards],
                         ids=lambda b: f"{b.__module__}.{b.__name__}")
def test_every_backend_kind_answers_every_method_of_the_backend_contract(backend):
    methods = [name for name, _ in inspect.getmembers(Backend) if not name.startswith("_")]
    missing = [name for name in methods if not hasattr(backend, name)]
    assert methods and missing == []


def test_abilities_have_defaults_a_layout_overrides_where_it_can_do_more():
    arrow, parquet, lance = (layout_module(n).Backend for n in ("arrow_shards", "parquet_shards", "lance_rows"))
    assert LayoutBackend.parquet_row_groups is arrow.parquet_row_groups  # the default: no row groups
    assert parquet.parquet_row_groups is not LayoutBackend.parquet_row_groups
    assert lance.in_place_files is not LayoutBackend.in_place_files  # Lance data is read in place on a store
    assert arrow.in_place_files.__func__ is LayoutBackend.in_place_files.__func__
