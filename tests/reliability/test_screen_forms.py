"""A real hub refuses every form a copy of the home's secret takes (issue 23).

The screen matched exact bytes only: the shared secret upper-cased, split in
halves (a space, a dash, a newline, a quote-plus-concatenation between), its
half alone, its base64 (standard, URL-safe) or the hex of its bytes, and a
half of the hub's private key in hex or base64, were stored in the room. Each
is now refused as the exact secret always was: 400 naming no secret, nothing
stored; and an honest post still goes in.
"""

from __future__ import annotations

import base64
import json

import httpx
from cryptography.hazmat.primitives import serialization

from tests.support import Society, record_output


def _forms(secret: str, raw_key: bytes) -> dict[str, str]:
    half = len(secret) // 2
    first, second = secret[:half], secret[half:]
    return {
        "upper case": secret.upper(),
        "halves, a space": f"{first} {second}",
        "halves, a dash": f"{first}-{second}",
        "halves, a newline": f"{first}\n{second}",
        "halves, quote-plus": f'"{first}" + "{second}"',
        "the first half alone": f"the start is {first}, that is all",
        "groups of four": " ".join(secret[i : i + 4] for i in range(0, len(secret), 4)),
        "base64": base64.b64encode(secret.encode()).decode(),
        "urlsafe base64, 1 byte in": base64.urlsafe_b64encode(b"k" + secret.encode()).decode(),
        "hex of its bytes": secret.encode().hex(),
        "base64 of the bytes it spells": base64.b64encode(bytes.fromhex(secret)).decode(),
        "the hub key's half, HEX": raw_key[:16].hex().upper(),
        "the hub key's half, base64": base64.b64encode(raw_key[16:]).decode(),
    }


def test_the_hub_refuses_every_form_of_a_secret(society: Society) -> None:
    society.start_hub()
    secret = society.secret().decode()
    key = serialization.load_pem_private_key(
        society.home.trust.hub_key_file.read_bytes(), password=None
    )
    raw_key = key.private_bytes(  # type: ignore[union-attr]
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    before = society.room.read_bytes() if society.room.exists() else b""
    stored = []
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for form, copy in _forms(secret, raw_key).items():
            payload = {"from": "stranger", "to": "@all", "type": "chat", "body": f"{form}: {copy}"}
            answer = client.post("/say", json=payload)
            record_output(f"screen forms: hub answer ({form})", answer.text)
            if answer.status_code != 400:
                stored.append(form)
                continue
            message = answer.json()["message"]
            assert "secret material" in message and "nothing was written" in message
        assert not stored, f"the hub stored these forms of a secret: {stored}"
        honest = {"from": "stranger", "to": "@all", "type": "chat", "body": "an honest line"}
        assert client.post("/say", json=honest).status_code == 200
    lines = society.lines()
    assert [line["body"] for line in lines[-1:]] == ["an honest line"]
    assert len(society.room.read_bytes()) > len(before)
    room = society.room.read_text()
    assert secret[: len(secret) // 2] not in room and secret.upper() not in room


def _fullwidth(text: str) -> str:
    """`text` in fullwidth letters and digits (U+FF01..U+FF5E), which NFKC folds back."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def test_the_hub_refuses_the_secret_reversed_and_in_fullwidth_letters(society: Society) -> None:
    """Issue 33: the screen missed the secret written backwards and in fullwidth letters
    (`ｓｅｃｒｅｔ`), which a reader turns back into the secret at a glance. A real hub refuses
    each (escaped as JSON sends it, and as raw UTF-8), nothing stored; honest non-ASCII
    text still goes in."""
    society.start_hub()
    secret = society.secret().decode()
    half = len(secret) // 2
    forms = {
        "reversed": secret[::-1],
        "reversed, upper case": secret[::-1].upper(),
        "reversed first half": secret[:half][::-1],
        "fullwidth": _fullwidth(secret),
        "fullwidth upper case": _fullwidth(secret.upper()),
        "fullwidth second half": "tail " + _fullwidth(secret[half:]),
        "fullwidth, reversed": _fullwidth(secret[::-1]),
        "half fullwidth, half not": _fullwidth(secret[:half]) + secret[half:],
    }
    stored = []
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for form, copy in forms.items():
            payload = {"from": "stranger", "to": "@all", "type": "chat", "body": f"{form}: {copy}"}
            for encoded in (
                json.dumps(payload).encode(),  # \\uff53 escapes
                json.dumps(payload, ensure_ascii=False).encode(),  # raw UTF-8
            ):
                answer = client.post(
                    "/say", content=encoded, headers={"content-type": "application/json"}
                )
                record_output(f"screen forms: hub answer ({form})", answer.text)
                if answer.status_code != 400:
                    stored.append(form)
                else:
                    assert "secret material" in answer.json()["message"]
        assert not stored, f"the hub stored these forms of the secret: {stored}"
        honest = (
            "Ｆｕｌｌｗｉｄｔｈ ｐｒｏｓｅ, café, ﬁne — and the secret's 12th letter is not here"
        )
        answer = client.post(
            "/say", json={"from": "stranger", "to": "@all", "type": "chat", "body": honest}
        )
        assert answer.status_code == 200, answer.text
    assert [line["body"] for line in society.lines()] == [honest]
