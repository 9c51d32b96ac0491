"""The screen (trust/screen.py): the home's whole secret set, any PEM private key, never echoed."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from agents.home import Home
from room.errors import SecretFileError, SecretFound
from tests.support import Society
from trust.screen import Screen
from trust.secretfiles import create_secret_file, read_secret_text


def foreign_pem(kind: str) -> str:
    """A private key that is not the home's, in one of the PEM forms people paste."""
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        form = serialization.PrivateFormat.TraditionalOpenSSL  # BEGIN RSA PRIVATE KEY
    elif kind == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
        form = serialization.PrivateFormat.TraditionalOpenSSL  # BEGIN EC PRIVATE KEY
    elif kind == "openssh":
        key = ed25519.Ed25519PrivateKey.generate()
        form = serialization.PrivateFormat.OpenSSH  # BEGIN OPENSSH PRIVATE KEY
        return key.private_bytes(
            serialization.Encoding.PEM, form, serialization.NoEncryption()
        ).decode()
    else:
        key = ed25519.Ed25519PrivateKey.generate()
        form = serialization.PrivateFormat.PKCS8  # BEGIN PRIVATE KEY
    return key.private_bytes(
        serialization.Encoding.PEM, form, serialization.NoEncryption()
    ).decode()


@pytest.mark.parametrize("kind", ["rsa", "ec", "openssh", "pkcs8"])
def test_any_pem_private_key_block_is_found(kind: str) -> None:
    """A PEM private key block of any common form is secret material, the home's or not."""
    pem = foreign_pem(kind)
    screen = Screen.of([])
    assert screen.find(f"look:\n{pem}\nthanks") == "a PEM private key block"
    assert screen.find_json({"note": pem}) == "a PEM private key block"  # \n escaped in JSON


def test_a_header_alone_is_not_a_key() -> None:
    """Documentation naming the format, with no key text after it, is not refused."""
    text = "a key file starts with -----BEGIN PRIVATE KEY----- and ends with END."
    assert Screen.of([]).find(text) is None


def test_every_secret_file_of_the_home_is_screened(society: Society) -> None:
    """The shared secret, the relaxed token, the hub key in every form, a nick's key and a
    token file added later under secrets/ are all found; the error never holds the value."""
    home = Home(society.root)
    screen = home.screen
    secret, token = society.secret().decode(), society.token()
    hub_pem = home.trust.hub_key_file.read_bytes()
    hub_key = serialization.load_pem_private_key(hub_pem, password=None)
    raw = hub_key.private_bytes(  # type: ignore[union-attr]
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    body = b"".join(line for line in hub_pem.splitlines() if not line.startswith(b"-----"))
    assert screen.screen().find(f"x {secret} y") == "the shared secret"
    assert screen.screen().find(token) == "the relaxed token"
    for form in (hub_pem, body, raw.hex().encode(), base64.b64encode(raw)):
        assert screen.screen().find(b"pasted: " + form) == "the hub's private key"
    # added while the process runs: a nick's key and a new token file are found next time
    from trust import keys

    keys.generate_private_key(home.trust.key_dir / "alice.key")
    alice = (home.trust.key_dir / "alice.key").read_bytes().splitlines()[1]
    read_token = "r" * 8 + "0123456789abcdef" * 3
    create_secret_file(society.root / "secrets" / "extra-token", read_token + "\n")
    assert screen.screen().find(alice) == "a private key of the home (alice.key)"
    assert screen.screen().find(read_token) == "a secret of the home (extra-token)"
    with pytest.raises(SecretFound) as caught:
        screen.check(f"prompt with {read_token}", "the prompt of step 'x'")
    assert "the prompt of step 'x'" in caught.value.message
    assert read_token not in caught.value.message and read_token not in str(caught.value.to_dict())


def test_a_short_secret_is_refused_with_the_way_out(tmp_path: Path) -> None:
    """A secret under 32 bytes is a SecretFileError (exit 78) saying how to make a new one."""
    path = tmp_path / "secrets" / "post-secret"
    short = "-".join(("too", "short", "a", "secret", "1234"))  # 23 bytes, never in this file
    create_secret_file(path, short + "\n")
    with pytest.raises(SecretFileError) as caught:
        read_secret_text(path, "shared secret file")
    message = caught.value.message
    assert "23 bytes" in message and "token_hex(32)" in message and str(path) in message
    assert short not in message
    assert caught.value.exit_code == 78
