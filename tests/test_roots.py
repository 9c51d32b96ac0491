"""agents/roots.py: the [roots] table, the checks made on it, and reads checked after opening."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.backpass.config import BackpassConfig
from agents.expedition.config import ExpeditionConfig
from agents.home import Home
from agents.roots import OutsideRoot, Roots, inside
from room.errors import ConfigError

# Built, not written whole, so the session's secret scan never finds it in this file.
SECRET = "s3cr3t" + "-value-for-the-test\n"


def home_with(root: Path, toml: str = "") -> Home:
    """A home with a secrets folder holding a secret, and this society.toml."""
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "post-secret").write_text(SECRET)
    (root / "kb").mkdir()
    (root / "society.toml").write_text(toml)
    return Home(root)


def kb_roots(home: Home) -> Roots:
    return ExpeditionConfig.of(home).roots(home)


class TestDeclaring:
    def test_defaults_are_the_homes_folders(self, tmp_path: Path) -> None:
        """With no [roots], each purpose's root is its folder in the home."""
        home = home_with(tmp_path / "home")
        roots = kb_roots(home)
        assert roots.places["kb"] == ((tmp_path / "home" / "kb").resolve(),)
        assert roots.places["briefs"] == ((tmp_path / "home" / "briefs").resolve(),)

    def test_an_old_homes_configured_path_outside_the_default_still_works(
        self, tmp_path: Path
    ) -> None:
        """A home laid down before [roots] with its kb elsewhere keeps that kb as a root."""
        elsewhere = tmp_path / "notes"
        elsewhere.mkdir()
        home = home_with(tmp_path / "home", f'[expedition]\nkb = "{elsewhere}"\n')
        assert elsewhere.resolve() in kb_roots(home).places["kb"]

    def test_a_configured_path_outside_a_declared_root_names_both(self, tmp_path: Path) -> None:
        """[roots] kb declared, [expedition] kb outside it: a ConfigError naming both."""
        toml = (
            f'[roots]\nkb = "{tmp_path / "allowed"}"\n[expedition]\nkb = "{tmp_path / "other"}"\n'
        )
        home = home_with(tmp_path / "home", toml)
        with pytest.raises(ConfigError) as caught:
            kb_roots(home)
        assert "[expedition] kb" in caught.value.message
        assert str(tmp_path / "allowed") in caught.value.message
        assert str(tmp_path / "other") in caught.value.message

    @pytest.mark.parametrize("value", [".", "secrets", "secrets/keys"])
    def test_a_root_holding_or_inside_the_secrets_is_refused(
        self, tmp_path: Path, value: str
    ) -> None:
        """[roots] traces = the home, or its secrets folder: a ConfigError naming both."""
        home = home_with(tmp_path / "home", f'[roots]\ntraces = "{value}"\n')
        with pytest.raises(ConfigError) as caught:
            BackpassConfig.from_home(home).roots(home)
        message = caught.value.message
        assert "[roots] traces" in message and str(tmp_path / "home" / "secrets") in message

    def test_an_old_homes_setting_pointing_at_the_home_is_refused(self, tmp_path: Path) -> None:
        """[backpass] traces = "." would hand the secrets to the bulk model: refused, named."""
        home = home_with(tmp_path / "home", '[backpass]\ntraces = "."\n')
        with pytest.raises(ConfigError, match=r"\[backpass\] traces"):
            BackpassConfig.from_home(home).roots(home)

    def test_an_unknown_roots_key_is_named(self, tmp_path: Path) -> None:
        """A misspelt [roots] key is an error naming it, not a root silently ignored."""
        home = home_with(tmp_path / "home", '[roots]\ntrace = "traces"\n')
        with pytest.raises(ConfigError, match=r"roots\.trace: unknown key"):
            home.society  # noqa: B018

    def test_the_build_root_is_declared_with_its_default(self, tmp_path: Path) -> None:
        """[roots] build exists now, default "build", for the build pipeline's REPO."""
        home = home_with(tmp_path / "home")
        roots = Roots.of(home, {"build": []})
        assert roots.places["build"] == ((tmp_path / "home" / "build").resolve(),)


class TestReading:
    def test_inside_is_by_path_components(self, tmp_path: Path) -> None:
        """`/a/kb2` is not inside `/a/kb`, `/a/kb/x` is."""
        assert inside(tmp_path / "kb", tmp_path / "kb" / "x")
        assert not inside(tmp_path / "kb", tmp_path / "kb2")

    def test_a_link_out_of_the_root_is_refused_with_the_file_named(self, tmp_path: Path) -> None:
        """A file in kb/ that links to secrets/post-secret is never read; the error names it."""
        home = home_with(tmp_path / "home")
        link = tmp_path / "home" / "kb" / "notes.md"
        link.symlink_to(tmp_path / "home" / "secrets" / "post-secret")
        with pytest.raises(OutsideRoot) as caught:
            kb_roots(home).read_bytes("kb", link)
        assert str(link) in caught.value.message and "[roots] kb" in caught.value.message
        assert "s3cr3t" not in caught.value.message

    def test_a_file_swapped_for_a_link_after_the_check_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The check passes on a real file; it is swapped for a link before the open: refused."""
        home = home_with(tmp_path / "home")
        path = tmp_path / "home" / "kb" / "notes.md"
        path.write_text("fine\n")
        roots = kb_roots(home)
        real_check = Roots.check

        def check_then_swap(self: Roots, purpose: str, given: object, what: str = "") -> Path:
            checked = real_check(self, purpose, given, what)  # type: ignore[arg-type]
            path.unlink()
            path.symlink_to(tmp_path / "home" / "secrets" / "post-secret")
            return checked

        monkeypatch.setattr(Roots, "check", check_then_swap)
        with pytest.raises(OutsideRoot, match="a link to"):
            roots.read_bytes("kb", path)

    def test_a_fifo_is_not_read_and_does_not_hang(self, tmp_path: Path) -> None:
        """A FIFO in a root is opened without blocking and refused as not a regular file."""
        home = home_with(tmp_path / "home")
        fifo = tmp_path / "home" / "kb" / "pipe.md"
        os.mkfifo(fifo)
        try:
            with pytest.raises(OSError, match="not a regular file"):
                kb_roots(home).read_bytes("kb", fifo)
        finally:
            fifo.unlink()

    def test_walk_lists_inside_and_refuses_links_out(self, tmp_path: Path) -> None:
        """Listing a folder names a link out of it as refused and never lists it as a file."""
        folder = tmp_path / "traces"
        folder.mkdir()
        (folder / "a.md").write_text("a\n")
        (folder / "b.md").symlink_to(folder / "a.md")
        (folder / "evil.md").symlink_to(tmp_path / "outside.txt")
        (tmp_path / "outside.txt").write_text("private\n")
        files, refused = Roots.single("traces", folder).walk("traces", folder)
        assert [p.name for p in files] == ["a.md", "b.md"]
        assert refused == [f"{folder / 'evil.md'} -> {(tmp_path / 'outside.txt').resolve()}"]

    def test_a_loop_of_links_is_refused_not_a_crash(self, tmp_path: Path) -> None:
        """A link loop in a traces folder is named as refused; the listing goes on."""
        folder = tmp_path / "traces"
        folder.mkdir()
        (folder / "a.md").write_text("a\n")
        (folder / "loop.md").symlink_to(folder / "loop.md")
        files, refused = Roots.single("traces", folder).walk("traces", folder)
        assert [p.name for p in files] == ["a.md"]
        assert refused == [f"{folder / 'loop.md'} -> (a loop of links)"]


class TestWriting:
    def test_a_write_replaces_a_link_rather_than_following_it(self, tmp_path: Path) -> None:
        """Writing over a name that is a link to a secret replaces the link; the secret is intact."""
        home = home_with(tmp_path / "home")
        secret = tmp_path / "home" / "secrets" / "post-secret"
        briefs = tmp_path / "home" / "briefs"
        briefs.mkdir()
        (briefs / "b.md").symlink_to(secret)
        kb_roots(home).write_bytes("briefs", briefs / "b.md", b"brief\n")
        assert not (briefs / "b.md").is_symlink() and (briefs / "b.md").read_bytes() == b"brief\n"
        assert secret.read_text() == SECRET

    def test_a_folder_outside_the_root_gets_nothing(self, tmp_path: Path) -> None:
        """A write to a folder outside the briefs root is refused before anything is made."""
        home = home_with(tmp_path / "home")
        with pytest.raises(OutsideRoot, match=r"\[roots\] briefs"):
            kb_roots(home).write_bytes("briefs", tmp_path / "elsewhere" / "b.md", b"x")
        assert not (tmp_path / "elsewhere").exists()
