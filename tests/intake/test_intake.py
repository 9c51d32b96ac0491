"""The one safe copy and the one bounded read, as plain functions on real files."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from agents.intake.bounded import MAX_TOML_DEPTH, load_toml, read_bounded, toml_depth
from agents.intake.safecopy import CopyRefused, copy_tree, plan_tree
from room.errors import UsageError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    top = tmp_path / "case"
    (top / "sub").mkdir(parents=True)
    (top / "a.md").write_text("a")
    (top / "sub" / "b.md").write_text("bb")
    return top


def test_links_inside_are_kept_pointing_into_the_copy(folder: Path, tmp_path: Path) -> None:
    os.symlink("../a.md", folder / "sub" / "rel.md")
    os.symlink(folder / "sub", folder / "abs")
    os.mkfifo(folder / "pipe")
    plan = copy_tree(folder, tmp_path / "copy", what="a test")
    copy = tmp_path / "copy"
    assert (plan.files, plan.apparent) == (2, 3)
    assert os.readlink(copy / "sub" / "rel.md") == "../a.md"
    assert Path(os.readlink(copy / "abs")) == copy / "sub"  # never the original
    assert (copy / "sub" / "rel.md").read_text() == "a" and not (copy / "pipe").exists()
    assert (copy / "a.md").stat().st_ino != (folder / "a.md").stat().st_ino


def test_a_link_out_is_refused_naming_it_and_nothing_is_written(
    folder: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("s3cr3t")
    os.symlink("../../secret", folder / "sub" / "t2.md")
    with pytest.raises(CopyRefused) as refused:
        copy_tree(folder, tmp_path / "copy", what="a test")
    assert str(folder / "sub" / "t2.md") in refused.value.message
    assert str(tmp_path / "secret") in refused.value.message
    assert not (tmp_path / "copy").exists()


def test_sizes_are_summed_apparent_and_allocated_before_copying(
    folder: Path, tmp_path: Path
) -> None:
    with open(folder / "sparse", "wb") as handle:
        handle.truncate(3 * 2**20)
    plan = plan_tree(folder, what="a test", limit=4 * 2**20)
    assert plan.apparent == 3 * 2**20 + 3 and plan.allocated < 2**20
    with pytest.raises(CopyRefused) as refused:
        copy_tree(folder, tmp_path / "copy", what="a test", limit=2**20)
    assert "3.0 MiB" in refused.value.message and "bound of 1.0 MiB" in refused.value.message
    assert not (tmp_path / "copy").exists()


def test_an_existing_target_is_never_written_through(folder: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "copy")
    with pytest.raises(CopyRefused):
        copy_tree(folder, tmp_path / "copy", what="a test")
    assert list(elsewhere.iterdir()) == []


def test_a_bounded_read_refuses_by_size_and_kind(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    assert read_bounded(big, 101, "the file") == b"x" * 101
    with pytest.raises(UsageError, match="101 bytes, over the bound of 100 bytes"):
        read_bounded(big, 100, "the file")
    with pytest.raises(UsageError, match="not a regular file"):
        read_bounded(tmp_path, 100, "the file")


@pytest.mark.parametrize(
    "text",
    [
        'title = "a [[[[ {{{{ . . . . . ]]"\n',
        "title = 'x.x.x.x.x'  # [[[[[[ a comment\n",
        'body = """\n[[[[[[[[\n\\"""\n"""\n',
        "body = '''[[[[[''''\n",
        "[a.b]\nc.d = [1.5, {e = 1}]\n",
    ],
)
def test_toml_depth_leaves_strings_and_comments_out(text: str) -> None:
    tomllib.loads(text)
    assert toml_depth(text) <= 4


def test_a_deep_toml_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    deep = tmp_path / "case.toml"
    deep.write_text("x = " + "[" * (MAX_TOML_DEPTH + 1) + "]" * (MAX_TOML_DEPTH + 1) + "\n")
    with pytest.raises(UsageError, match="nests 33 levels deep"):
        load_toml(deep, 1024, "the case")
    deep.write_text("x = " + "[" * MAX_TOML_DEPTH + "]" * MAX_TOML_DEPTH + "\n")
    assert load_toml(deep, 1024, "the case")["x"]
