"""The tree's proofs against RFC 9162 §2.1 computed from its own recursive definitions.

Every old size 1…n against every n up to 20 for consistency, every leaf for
inclusion, through the hub's on-disk tree (room/tree.py) as it grows; and
the verifiers accept exactly those proofs and refuse a tampered one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from room.tree import Tree
from tests.tlog import naive
from trust import merkle

LINES = [f'{{"seq":{i + 1},"body":"line {i + 1}"}}'.encode() for i in range(20)]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    made = Tree(tmp_path / "room.jsonl.tlog")
    yield made
    made.close()


class TestAgainstTheRfc:
    def test_consistency_for_every_old_size_up_to_20(self, tree: Tree) -> None:
        """PROOF(m, D[n]) from the tree equals the RFC's SUBPROOF for 1 <= m <= n <= 20, and verifies."""
        for n in range(1, 21):
            tree.append([LINES[n - 1]])
            assert tree.root() == naive.mth(LINES[:n])
            for m in range(1, n + 1):
                expected = naive.proof(m, LINES[:n])
                got = tree.consistency(m, n)
                assert got == expected, (m, n)
                assert merkle.verify_consistency(
                    m, n, naive.mth(LINES[:m]), naive.mth(LINES[:n]), got
                ), (m, n)

    def test_inclusion_for_every_leaf_up_to_20(self, tree: Tree) -> None:
        """PATH(m, D[n]) from the tree equals the RFC's for every leaf of every size, and verifies."""
        for n in range(1, 21):
            tree.append([LINES[n - 1]])
            for m in range(n):
                expected = naive.path(m, LINES[:n])
                got = tree.inclusion(m, n)
                assert got == expected, (m, n)
                leaf = merkle.leaf_hash(LINES[m])
                assert merkle.verify_inclusion(m, n, leaf, got, naive.mth(LINES[:n]))

    def test_older_sizes_are_proved_from_a_larger_tree(self, tree: Tree) -> None:
        """A tree of 20 still proves every pair of smaller sizes (the hub serves old checkpoints)."""
        tree.append(LINES)
        for n in range(1, 21):
            assert tree.root(n) == naive.mth(LINES[:n])
            for m in range(1, n + 1):
                assert tree.consistency(m, n) == naive.proof(m, LINES[:n])

    def test_a_few_known_values(self) -> None:
        """The empty root, and leaf and node hashes, are SHA-256 with the RFC's prefixes."""
        assert merkle.EMPTY_ROOT.hex() == (
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        assert merkle.leaf_hash(b"") == bytes.fromhex(
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        )
        assert merkle.root_of([]) == merkle.EMPTY_ROOT


class TestRefusals:
    def test_a_tampered_consistency_proof_fails(self) -> None:
        """Each hash flipped, one dropped, one added, or the wrong roots: refused."""
        for n in range(2, 21):
            new_root = naive.mth(LINES[:n])
            for m in range(1, n):
                good = naive.proof(m, LINES[:n])
                old_root = naive.mth(LINES[:m])
                for i in range(len(good)):
                    bad = list(good)
                    bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
                    assert not merkle.verify_consistency(m, n, old_root, new_root, bad)
                assert not merkle.verify_consistency(m, n, old_root, new_root, good[:-1])
                assert not merkle.verify_consistency(m, n, old_root, new_root, [*good, old_root])
                assert not merkle.verify_consistency(m, n, new_root, new_root, good)

    def test_a_tampered_inclusion_proof_fails(self) -> None:
        """A changed line, the wrong index or a shortened path does not lead to the root."""
        root = naive.mth(LINES)
        for m in range(20):
            good = naive.path(m, LINES)
            leaf = merkle.leaf_hash(LINES[m])
            assert not merkle.verify_inclusion(m, 20, merkle.leaf_hash(LINES[m] + b" "), good, root)
            assert not merkle.verify_inclusion((m + 1) % 20, 20, leaf, good, root)
            assert not merkle.verify_inclusion(m, 20, leaf, good[:-1], root)

    def test_sizes_beyond_the_tree_are_refused(self, tree: Tree) -> None:
        """Asking for a proof past the tree, or from > to, is a ProofError saying what to ask."""
        tree.append(LINES[:5])
        with pytest.raises(merkle.ProofError, match="at most 5"):
            tree.inclusion(0, 6)
        with pytest.raises(merkle.ProofError, match="not in a tree"):
            tree.inclusion(5, 5)
        with pytest.raises(merkle.ProofError, match="cannot be an earlier state"):
            tree.consistency(4, 3)


class TestTheFiles:
    def test_reopened_and_repaired_after_a_torn_write(self, tmp_path: Path) -> None:
        """A torn last hash and a lost upper level are repaired on open: the root is the RFC's."""
        folder = tmp_path / "room.jsonl.tlog"
        tree = Tree(folder)
        tree.append(LINES[:13])
        tree.close()
        with (folder / "level-00").open("ab") as torn:
            torn.write(b"\x01" * 7)
        (folder / "level-02").write_bytes(b"")
        again = Tree(folder)
        assert again.size == 13 and again.root() == naive.mth(LINES[:13])
        again.truncate(9)
        assert again.root() == naive.mth(LINES[:9])
        again.append(LINES[9:20])
        assert again.root() == naive.mth(LINES)
        again.close()
