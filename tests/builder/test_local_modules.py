"""A builder's code identity: scripts import helpers beside them (and editing one rebuilds);
classes without a source file (exec, python -c) are fingerprinted by methods and the globals they read."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import stable_datasets as sds
from stable_datasets.builder.local_modules import local_module_files, local_modules

SCRIPT = """
import stable_datasets as sds
{import_line}

class Helped(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({{"x": sds.Value("string")}}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {{}})]

    def _generate_examples(self):
        for i in range(3):
            yield i, {{"x": label(i)}}
"""


def _folder(tmp_path, name, import_line, helper_body='def label(i):\n    return f"v1-{i}"\n'):
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(SCRIPT.format(import_line=import_line))
    (folder / "helper.py").write_text(helper_body)
    return folder


@pytest.mark.parametrize("import_line", [
    "from helper import label", "from .helper import label",
    "import helper\nlabel = helper.label", "from . import helper as h\nlabel = h.label",
])
def test_script_imports_its_helper_and_an_edit_rebuilds(tmp_path, import_line):
    folder = _folder(tmp_path, "helped", import_line)
    first = sds.load_dataset(str(folder), split="train")
    assert first["x"] == ["v1-0", "v1-1", "v1-2"]
    (folder / "helper.py").write_text('def label(i):\n    return f"v2-{i}"\n')
    second = sds.load_dataset(str(folder), split="train")
    assert second["x"] == ["v2-0", "v2-1", "v2-2"]
    assert second.cache_dirs[0].parent != first.cache_dirs[0].parent
    assert "helper" not in sys.modules  # the plain import did not leak a top-level module


@pytest.mark.parametrize("init_imports_script", [False, True])
def test_a_package_folder_runs_its_init_and_an_edit_of_it_rebuilds(tmp_path, init_imports_script):
    # a folder with an __init__.py is a package as Python runs it: before, `from . import label`
    # of a name the __init__.py defines failed with "cannot import name 'label' from
    # 'stable_datasets_builder_...' (unknown location)", and edits of __init__.py were not fingerprinted
    folder = tmp_path / "packaged"
    folder.mkdir()
    (folder / "packaged.py").write_text(SCRIPT.format(import_line="from . import label"))
    init = 'def label(i):\n    return f"init1-{i}"\n'
    if init_imports_script:  # the common `from .packaged import *` in a package's __init__.py
        init += 'from .packaged import *  # noqa\n'
    (folder / "__init__.py").write_text(init)
    assert sds.load_dataset(str(folder), split="train")["x"] == ["init1-0", "init1-1", "init1-2"]
    (folder / "__init__.py").write_text(init.replace("init1", "init2"))
    assert sds.load_dataset(str(folder), split="train")["x"] == ["init2-0", "init2-1", "init2-2"]
    assert folder / "__init__.py" in local_module_files(folder / "packaged.py")


def test_two_folders_with_same_named_helpers_do_not_collide(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _folder(tmp_path / "a", "same", "from helper import label", 'def label(i):\n    return f"a{i}"\n')
    b = _folder(tmp_path / "b", "same", "from helper import label", 'def label(i):\n    return f"b{i}"\n')
    assert sds.load_dataset(str(a), split="train")["x"] == ["a0", "a1", "a2"]
    assert sds.load_dataset(str(b), split="train")["x"] == ["b0", "b1", "b2"]


def test_local_modules_are_found_statically_including_lazy_and_nested_imports(tmp_path):
    folder = tmp_path / "deep"
    (folder / "utils").mkdir(parents=True)
    (folder / "deep.py").write_text(textwrap.dedent(SCRIPT.format(import_line="from .utils.text import label")) +
                                    "\n\ndef later():\n    import lazy\n    return lazy\n")
    (folder / "utils" / "__init__.py").write_text("")
    (folder / "utils" / "text.py").write_text("import numpy\nfrom . import shared\n"
                                              "def label(i):\n    return shared.PREFIX + str(i)\n")
    (folder / "utils" / "shared.py").write_text("PREFIX = 't'\n")
    (folder / "lazy.py").write_text("VALUE = 1\n")
    (folder / "unrelated.py").write_text("raise RuntimeError('never imported')\n")
    files = [p.relative_to(folder).as_posix() for p in local_module_files(folder / "deep.py")]
    assert files == ["lazy.py", "utils/__init__.py", "utils/shared.py", "utils/text.py"]
    cls = sds.load_builder(str(folder)).__class__
    names = [m.__name__.split(".", 1)[1] for m in local_modules(cls)]
    assert names == ["deep", "lazy", "utils", "utils.shared", "utils.text"]
    assert sds.load_dataset(str(folder), split="train")["x"] == ["t0", "t1", "t2"]
    before = sds.load_builder(str(folder)).fingerprint()
    (folder / "lazy.py").write_text("VALUE = 2\n")  # imported only inside a function, still part of the identity
    assert sds.load_builder(str(folder)).fingerprint() != before
    (folder / "unrelated.py").write_text("X = 1\n")
    after_lazy = sds.load_builder(str(folder)).fingerprint()
    (folder / "unrelated.py").write_text("X = 2\n")
    assert sds.load_builder(str(folder)).fingerprint() == after_lazy


def test_local_modules_of_a_class_without_a_script_is_empty():
    class Inline(sds.GeneratorBasedBuilder):
        pass

    assert local_modules(Inline) == []


EXEC_BUILDER = """
import stable_datasets as sds
ROWS = {rows}

class Ex(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({{"x": sds.Value("int64")}}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {{}})]

    def _generate_examples(self):
        for i in range(ROWS):
            yield i, {{"x": i}}
"""


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_builder_defined_under_python_c_builds_and_is_stable_across_processes():
    code = textwrap.dedent(EXEC_BUILDER.format(rows=4)) + textwrap.dedent("""
        b = Ex()
        ds = b.as_dataset("train")
        print(b.fingerprint(), len(ds))
    """)
    first, second = _run(code), _run(code)
    assert first == second and first.endswith(" 4")


def test_global_changed_under_exec_changes_the_fingerprint():
    def define(rows: int) -> type:
        namespace: dict = {"__name__": "exec_builders"}
        exec(textwrap.dedent(EXEC_BUILDER.format(rows=rows)), namespace)
        return namespace["Ex"]

    three, five = define(3)(), define(5)()
    assert three.fingerprint() != five.fingerprint()
    assert len(three.as_dataset("train")) == 3 and len(five.as_dataset("train")) == 5
    assert define(3)().fingerprint() == three.fingerprint()
    namespace_cls = define(3)
    namespace_cls._generate_examples.__globals__["ROWS"] = 7  # the same class object, its global edited
    assert namespace_cls().fingerprint() != three.fingerprint()


def test_exec_inside_a_file_is_not_mistaken_for_that_file(tmp_path):
    """A class exec'd from a string inside a module is identified by its code, not the module's file text."""
    module = tmp_path / "maker.py"
    module.write_text(f"SOURCE = {EXEC_BUILDER.format(rows=2)!r}\n"
                      "def make():\n    ns = {'__name__': 'maker'}\n    exec(SOURCE, ns)\n    return ns['Ex']\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import maker; "
            "print(maker.make()().source_text().splitlines()[0])")
    assert _run(code) == "# no source file: methods and the globals they read"
