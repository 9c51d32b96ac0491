"""The run's bytecode plugin (tests/bytecode.py): compiled once, then taken back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.bytecode import Bytecode


def test_compiles_the_packages_and_removes_only_what_it_wrote(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for module in (package / "__init__.py", package / "one.py", package / "sub" / "two.py"):
        module.write_text("VALUE = 1\n")
    kept = Path(importlib.util.cache_from_source(str(package / "one.py")))
    kept.parent.mkdir()
    kept.write_bytes(b"written by someone else")  # stale: compileall rewrites it, never ours

    bytecode = Bytecode(tmp_path, ("pkg",))
    bytecode.compile()

    two = Path(importlib.util.cache_from_source(str(package / "sub" / "two.py")))
    init = Path(importlib.util.cache_from_source(str(package / "__init__.py")))
    assert two.is_file() and init.is_file()
    assert kept.read_bytes() != b"written by someone else"  # recompiled from its source
    assert set(bytecode.files) == {two, init}

    bytecode.remove()
    assert not two.exists() and not init.exists()
    assert not two.parent.exists()  # the folder it made is gone
    assert kept.is_file() and kept.parent.is_dir()  # what was there before stays
