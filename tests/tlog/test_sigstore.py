"""The hub's checkpoints and inclusion proofs, checked by sigstore-python's code, not ours.

A real hub (the JSONL room and the JetStream stream) stores a few thousand
lines; sigstore's C2SP checkpoint parser reads its `/tlog/checkpoint`, its
signed-note verifier checks the hub's signature, and its RFC 6962
inclusion-proof code (the Trillian port Rekor's clients use) walks the hub's
proofs to the signed root.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from sigstore._internal import merkle as sigstore_merkle
from sigstore._internal.rekor.checkpoint import SignedCheckpoint
from sigstore._internal.trust import Keyring
from sigstore._utils import KeyID
from sigstore.errors import VerificationError
from sigstore_models.common import v1 as common_v1

from tests.conftest import ENGINES
from tests.support import HTTP, Society, society_on
from tests.tlog import naive
from tests.tlog.helpers import checkpoint_of, fill, get, prepare, proof
from trust import keys, note

LINES = 2500


@pytest.fixture(scope="module", params=ENGINES)
def filled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Society, str, list[bytes]]]:
    """A hub on each engine with LINES lines, its checkpoint of them, and the room's bytes."""
    society = society_on(
        request.param,
        tmp_path_factory.mktemp("sigstore") / "home",
        lambda: request.getfixturevalue("nats_server"),
    )
    prepare(society)
    society.start_hub()
    try:
        fill(society, LINES)
        text = checkpoint_of(society, LINES)
        lines = society.room.read_bytes().split(b"\n")[:-1]
        assert len(lines) == LINES
        yield society, text, lines
    finally:
        society.stop_all()


def _keyring(society: Society) -> Keyring:
    public = keys.load_private_key(society.home.trust.hub_key_file).public_key()
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # sigstore's models take bytes fields as base64, as in its trust-root JSON
    key = common_v1.PublicKey(
        raw_bytes=base64.b64encode(der), key_details=common_v1.PublicKeyDetails.PKIX_ED25519
    )
    return Keyring([key])


def _sigstore_root(line: bytes, index: int, size: int, hashes: list[bytes]) -> bytes:
    """Walk an inclusion proof to its root with sigstore's RFC 6962 code."""
    inner, border = sigstore_merkle._decomp_inclusion_proof(index, size)
    assert len(hashes) == inner + border
    leaf = sigstore_merkle._hash_leaf(line)
    partial = sigstore_merkle._chain_inner(leaf, hashes[:inner], index)
    return sigstore_merkle._chain_border_right(partial, hashes[inner:])


def test_sigstore_reads_and_verifies_the_checkpoint(
    filled: tuple[Society, str, list[bytes]],
) -> None:
    """sigstore parses the C2SP checkpoint, finds the hub's signature by key hash, verifies it."""
    society, text, lines = filled
    parsed = SignedCheckpoint.from_text(text)
    assert parsed.checkpoint.log_size == LINES
    assert parsed.checkpoint.log_hash == naive.mth(lines).hex()
    assert parsed.checkpoint.origin.startswith("bullpen/")
    hub_hash = note.parse(text).signatures[0].hash
    parsed.signed_note.verify(_keyring(society), KeyID(hub_hash))
    forged = SignedCheckpoint.from_text(text.replace(f"\n{LINES}\n", f"\n{LINES - 1}\n"))
    with pytest.raises(VerificationError):
        forged.signed_note.verify(_keyring(society), KeyID(hub_hash))


def test_sigstore_verifies_inclusion_proofs(filled: tuple[Society, str, list[bytes]]) -> None:
    """Proofs for leaves across the room, at the signed size and at older sizes, reach the root."""
    society, text, lines = filled
    signed_root = note.parse(text).head().root
    seqs = sorted({1, 2, 3, 255, 256, 257, 1024, 1025, 2047, 2048, 2049, LINES - 1, LINES})
    seqs += list(range(7, LINES, 97))
    for seq in seqs:
        hashes = proof(society, "inclusion", seq=seq, size=LINES)
        assert len(hashes) <= 12  # ceil(log2(2500))
        assert _sigstore_root(lines[seq - 1], seq - 1, LINES, hashes) == signed_root, seq
        with pytest.raises(AssertionError):  # a changed line does not reach the root
            assert _sigstore_root(lines[seq - 1] + b" ", seq - 1, LINES, hashes) == signed_root
    for size in (1, 5, 1000, 1999):
        root = naive.mth(lines[:size])
        for seq in {1, size // 2 + 1, size}:
            hashes = proof(society, "inclusion", seq=seq, size=size)
            assert _sigstore_root(lines[seq - 1], seq - 1, size, hashes) == root, (seq, size)


def test_consistency_proofs_match_the_rfc(filled: tuple[Society, str, list[bytes]]) -> None:
    """The hub's consistency proofs between old sizes and the signed one are the RFC's."""
    society, _, lines = filled
    for old in (1, 2, 3, 4, 7, 8, 100, 1024, 1500, LINES - 1, LINES):
        assert proof(society, "consistency", **{"from": old, "to": LINES}) == naive.proof(
            old, lines
        ), old


@pytest.mark.parametrize(
    ("path", "params", "why"),
    [
        ("/tlog/proof/inclusion", {"seq": 1, "size": LINES + 1}, "beyond the tree"),
        ("/tlog/proof/inclusion", {"seq": LINES + 1, "size": LINES}, "is not in a tree"),
        ("/tlog/proof/inclusion", {"seq": 0, "size": 3}, "between 1 and"),
        ("/tlog/proof/inclusion", {"size": 3}, "seq is required"),
        ("/tlog/proof/consistency", {"from": 9, "to": 8}, "larger than to"),
        ("/tlog/proof/consistency", {"from": 1, "to": LINES + 1}, "beyond the tree"),
        ("/tlog/proof/consistency", {"from": "x", "to": 2}, "whole number"),
        ("/tlog/proof/consistency", {"from": 1, "size": 2}, "unknown parameter"),
    ],
)
def test_bad_proof_requests_are_4xx(
    filled: tuple[Society, str, list[bytes]], path: str, params: dict[str, object], why: str
) -> None:
    """A size past the tree, a seq outside it or from > to is a 400 that says what to ask."""
    society = filled[0]
    answer = get(society, path, **params)
    assert answer.status_code == 400 and why in answer.json()["message"], answer.text


def test_the_endpoints_need_the_read_token(filled: tuple[Society, str, list[bytes]]) -> None:
    """Without the read token the strict listener answers 401 and no tree data."""

    society = filled[0]
    for path in ("/tlog/checkpoint", "/tlog/proof/inclusion?seq=1&size=1"):
        answer = HTTP.get(f"{society.strict_url}{path}", timeout=10)
        assert answer.status_code == 401, answer.text
        assert "proof" not in answer.text and "bullpen/" not in answer.text


def test_the_tree_files_rebuild_from_the_room(
    filled: tuple[Society, str, list[bytes]], tmp_path: Path
) -> None:
    """A tree built from the room file alone gives the hub's signed root (rebuildable)."""
    from room.tree import Tree

    _, text, lines = filled
    tree = Tree(tmp_path / "rebuilt.tlog")
    tree.append(lines)
    assert tree.root() == note.parse(text).head().root
    tree.close()
