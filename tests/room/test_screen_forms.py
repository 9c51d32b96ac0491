"""The screen finds a secret in the forms a copy takes, and nothing in ordinary text (issue 23).

An upper-cased hex secret, one split in halves (a space, a dash, a newline, a
quote-plus-concatenation between), a half alone, a secret cut in groups of
four, and base64 (standard and URL-safe, at each alignment) or hex of its
bytes all used to pass the screen, which matched exact bytes only.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import uuid
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from trust.screen import Screen

SECRET = secrets.token_hex(32)  # as bullpen makes its shared secret and tokens
KEY = ed25519.Ed25519PrivateKey.generate()
RAW = KEY.private_bytes(
    serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
)
PEM = KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def halves(s: str) -> tuple[str, str]:
    return s[: len(s) // 2], s[len(s) // 2 :]


TEXT_FORMS: dict[str, Callable[[str], str]] = {
    "exact": lambda s: s,
    "upper case": str.upper,
    "mixed case": lambda s: "".join(c.upper() if i % 3 else c for i, c in enumerate(s)),
    "halves, a space": lambda s: " ".join(halves(s)),
    "halves, a dash": lambda s: "-".join(halves(s)),
    "halves, a newline": lambda s: "\n".join(halves(s)),
    "halves, quote-plus": lambda s: '"{}" + "{}"'.format(*halves(s)),
    "halves, far apart": lambda s: "first {} and, later on, {} last".format(*halves(s)),
    "the first half alone": lambda s: halves(s)[0],
    "the second half alone": lambda s: halves(s)[1],
    "groups of four": lambda s: " ".join(s[i : i + 4] for i in range(0, len(s), 4)),
    "colon pairs, upper": lambda s: ":".join(s[i : i + 2] for i in range(0, len(s), 2)).upper(),
    "base64 of its text": lambda s: b64(s.encode()),
    "base64 of its text, 1 byte in": lambda s: b64(b"x" + s.encode())[4:],
    "base64 of its text, 2 bytes in": lambda s: b64(b"xy" + s.encode())[4:],
    "urlsafe base64 of its text": lambda s: b64url(s.encode()),
    "base64 of its second half": lambda s: b64(halves(s)[1].encode()),
    "hex of its text": lambda s: s.encode().hex(),
    "HEX of its text": lambda s: s.encode().hex().upper(),
    "base64 of the bytes it spells": lambda s: b64(bytes.fromhex(s)),
    "urlsafe base64 of the bytes it spells": lambda s: b64url(bytes.fromhex(s)),
}


@pytest.mark.parametrize("form", TEXT_FORMS)
def test_each_form_of_a_hex_token_is_found(form: str) -> None:
    screen = Screen.of([(SECRET, "the shared secret")])
    copy = TEXT_FORMS[form](SECRET)
    assert screen.find(f"here it is: {copy} -- thanks") == "the shared secret", copy
    as_json = json.dumps({"from": "x", "to": "@all", "type": "chat", "body": f"see {copy}"})
    assert screen.find(as_json) == "the shared secret"  # the raw request, escapes and all
    assert screen.find_json({"body": f"see {copy}"}) == "the shared secret"


KEY_FORMS: dict[str, Callable[[bytes], str]] = {
    "hex": lambda raw: raw.hex(),
    "HEX, halves": lambda raw: " ".join(halves(raw.hex().upper())),
    "hex of the first half": lambda raw: raw[:16].hex(),
    "base64": lambda raw: b64(raw),
    "urlsafe base64": lambda raw: b64url(raw),
    "base64 of the second half": lambda raw: b64(raw[16:]),
    "base64 of a half, 1 byte in": lambda raw: b64(b"q" + raw[:16])[4:],
    "base64 of a half, 2 bytes in": lambda raw: b64(b"qq" + raw[16:])[4:],
    "the PEM body": lambda raw: b"".join(PEM.splitlines()[1:-1]).decode(),
    "the PEM body's second half, upper": lambda raw: halves(PEM.splitlines()[1].decode())[
        1
    ].upper(),
}


@pytest.mark.parametrize("form", KEY_FORMS)
def test_each_form_of_a_private_key_is_found(form: str) -> None:
    from trust.screen import _values

    screen = Screen.of_secrets(_values(PEM, "the hub's private key"))
    copy = KEY_FORMS[form](RAW)
    assert screen.find(f"pasted: {copy}.") == "the hub's private key", copy


def ordinary_texts() -> dict[str, str]:
    rsa_public = (
        rsa.generate_private_key(public_exponent=65537, key_size=1024)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    ed_public = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "prose": "The deploy worked after the retry, and the tests passed. " * 400,
        "long words": "internationalization counterrevolutionaries electroencephalographs " * 50,
        "hashes": " ".join(os.urandom(32).hex() for _ in range(200)),
        "upper hashes": " ".join(os.urandom(32).hex().upper() for _ in range(200)),
        "uuids": " ".join(str(uuid.uuid4()) for _ in range(300)),
        "base64 blob": b64(os.urandom(48 * 1024)),
        "numbers": json.dumps(list(range(100_000, 112_000))),
        "digits": "3" * 5000 + "6" * 5000 + "".join(str(n) for n in range(5000)),
        "another token": secrets.token_hex(32) + " " + secrets.token_urlsafe(32),
        "rsa public key": rsa_public,
        "this key's public half": ed_public.decode(),
        "a room line": json.dumps(
            {"seq": 12, "id": "01J" + "A" * 23, "ts": "2026-12-03T07:01:02.123Z", "body": "ok"}
        ),
    }


@pytest.mark.parametrize("label", list(ordinary_texts()))
def test_ordinary_text_is_not_a_secret(label: str) -> None:
    from trust.screen import _values

    screen = Screen.of_secrets(
        [*_values(SECRET.encode(), "the shared secret"), *_values(PEM, "the hub's key")]
    )
    text = ordinary_texts()[label]
    assert screen.find(text) is None
    assert screen.find_json({"body": text[:60_000]}) is None


def test_a_passphrase_is_found_whole_only() -> None:
    """A secret with spaces (not a token) is not cut into pieces: its words are ordinary."""
    phrase = "correct horse battery staple and more words"
    screen = Screen.of([(phrase, "a passphrase")])
    assert screen.find(f"it is {phrase.upper()}!") == "a passphrase"
    assert screen.find("correct horse battery staples are everywhere") is None


def test_the_casefold_only_letters_are_this_pythons() -> None:
    """trust/screen.py's CASEFOLD_ONLY: every character NFKC keeps but case folding turns
    into a token character, recomputed from this interpreter's Unicode tables."""
    import unicodedata

    from trust.screen import CASEFOLD_ONLY, TOKEN_CHARS

    found = {
        chr(point)
        for point in range(0x80, 0x20000)
        if not 0xD800 <= point < 0xE000
        and unicodedata.normalize("NFKC", chr(point)) == chr(point)
        and chr(point).casefold() != chr(point)
        and any(c in TOKEN_CHARS for c in unicodedata.normalize("NFKC", chr(point).casefold()))
    }
    assert found == set(CASEFOLD_ONLY)


def test_the_secret_reversed_in_fullwidth_or_sharp_s_is_found() -> None:
    secret = "0123456789abcdef" * 4
    screen = Screen.of([(secret, "the test secret"), ("pass phrase with ss and spaces", "p")])
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in secret)
    assert screen.find(secret[::-1]) == "the test secret"
    assert screen.find(f"x {fullwidth} y") == "the test secret"
    assert screen.find(fullwidth[::-1]) == "the test secret"
    assert screen.find("PASS PHRASE WITH ß AND SPACES") == "p"
    assert screen.find("secaps dna ss htiw esarhp ssap") == "p"
    assert screen.find("Ｆｕｌｌｗｉｄｔｈ prose, café, ﬁne, 東京 — ß") is None
