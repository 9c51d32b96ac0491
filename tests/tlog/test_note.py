"""Signed notes, verifier keys and cosignatures in the C2SP formats.

The Go sumdb `note` package's own example (golang.org/x/mod/sumdb/note)
verifies here: the key hash, the verifier key string and the signature line
are read as Go reads them.
"""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from trust import note
from trust.note import NoteError

GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_SIGNED = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class TestGoCompatibility:
    def test_the_go_example_verifies(self) -> None:
        """Go's example note and verifier key parse and verify; a changed text does not."""
        verifier = note.parse_verifier(GO_VKEY)
        assert verifier.text() == GO_VKEY
        assert note.parse(GO_SIGNED).verify(verifier)
        assert not note.parse(GO_SIGNED.replace("problem,", "problem;")).verify(verifier)

    def test_a_verifier_key_with_a_wrong_hash_is_refused(self) -> None:
        """The key hash binds the name: another name or hash is an error that says so."""
        with pytest.raises(NoteError, match="does not match"):
            note.parse_verifier(GO_VKEY.replace("c74f20a3", "c74f20a4"))
        with pytest.raises(NoteError, match="does not match"):
            note.parse_verifier(GO_VKEY.replace("PeterNeumann", "PeterNeumanm"))
        with pytest.raises(NoteError, match="NAME\\+HEXHASH\\+BASE64"):
            note.parse_verifier("not a key")


class TestCheckpoints:
    def test_a_checkpoint_round_trips(self) -> None:
        """origin, size, base64 root, blank line, one em-dash signature line; hash by hand."""
        key = Ed25519PrivateKey.generate()
        head = note.TreeHead("bullpen/test", 42, bytes(range(32)))
        signed = note.sign(head.body(), "bullpen/test", key)
        text = signed.render()
        lines = text.split("\n")
        assert lines[:4] == ["bullpen/test", "42", base64.b64encode(bytes(range(32))).decode(), ""]
        assert lines[4].startswith("\u2014 bullpen/test ") and text.endswith("\n")
        raw = base64.b64decode(lines[4].split(" ")[2])
        by_hand = hashlib.sha256(b"bullpen/test\n\x01" + _raw(key)).digest()[:4]
        assert raw[:4] == by_hand and len(raw) == 4 + 64
        key.public_key().verify(raw[4:], head.body().encode())  # signs the note text
        parsed = note.parse(text)
        assert parsed.head() == head
        verifier = note.verifier_of("bullpen/test", key)
        assert parsed.verify(verifier)
        assert verifier.text().startswith(f"bullpen/test+{by_hand.hex()}+")

    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("a\n1\nAAAA\n", "no signature block"),
            ("a\n1\nAAAA\n\nno dash\n", "does not start"),
            ("a\nx\n" + base64.b64encode(b"\0" * 32).decode() + "\n\n\u2014 a AAAAAAAA\n", "size"),
            ("a\n1\nAAAA\n\n\u2014 a AAAAAAAA\n", "root hash"),
            ("a\r\n1\n", "carriage return"),
        ],
    )
    def test_malformed_notes_are_refused(self, text: str, why: str) -> None:
        """A malformed note is a NoteError that names what is wrong."""
        with pytest.raises(NoteError, match=why):
            note.parse(text).head()


class TestCosignatures:
    def test_a_cosignature_is_tlog_cosignature_v1(self) -> None:
        """Key hash with type 0x04, then the 8-byte time, then the signature of the v1 message."""
        witness = Ed25519PrivateKey.generate()
        body = note.TreeHead("bullpen/test", 7, b"\x07" * 32).body()
        line = note.cosign(body, "witness/a", witness, 1_700_000_000)
        assert line.hash == hashlib.sha256(b"witness/a\n\x04" + _raw(witness)).digest()[:4]
        assert struct.unpack(">Q", line.value[:8])[0] == 1_700_000_000
        message = b"cosignature/v1\ntime 1700000000\n" + body.encode()
        witness.public_key().verify(line.value[8:], message)
        verifier = note.verifier_of("witness/a", witness, note.COSIGNATURE)
        assert note.parse_verifier(verifier.text()) == verifier
        assert base64.b64decode(verifier.text().split("+", 2)[2])[0] == 0x04
        cosigned = note.Note(body, [line])
        assert cosigned.verify(verifier)
        # the same key as a plain note signer (0x01) does not accept it
        assert not cosigned.verify(note.verifier_of("witness/a", witness))


def test_a_verifier_key_whose_base64_holds_a_plus_parses() -> None:
    """The key's base64 may contain '+': only the first two '+' separate the fields (as Go's)."""
    while True:
        key = Ed25519PrivateKey.generate()
        text = note.verifier_of("bullpen/x", key).text()
        if "+" in text.split("+", 2)[2]:
            break
    assert note.parse_verifier(text).text() == text
