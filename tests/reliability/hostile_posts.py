"""Hypothesis strategies for hostile posts (tests/reliability/test_hostile_input.py).

Near-valid posts spliced with what strict JSON forbids (NaN, Infinity, 1e400, numbers with
thousands of digits, duplicate keys, lone surrogates, deep nesting), and how many examples
a property runs (CI a few hundred, `--soak` thousands).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

FORBIDDEN = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1" * 5000,
    "-" + "9" * 4400,
    '"\\ud800"',
    '"a\\udfff"',
    "[" * 40 + "]" * 40,
    '{"a":' * 40 + "1" + "}" * 40,
    "[" * 5000 + "]" * 5000,
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
nicks = st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)
tokens = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,20}", fullmatch=True)


def mostly(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """Valid nine times in ten, so examples get past the first check and deeper in."""
    return st.integers(0, 9).flatmap(lambda n: invalid if n == 0 else valid)


field_values: dict[str, Any] = {
    "from": mostly(nicks, st.one_of(st.text(max_size=40), json_scalars)),
    "to": mostly(
        st.one_of(nicks.map(lambda n: "@" + n), nicks),
        st.one_of(st.text(max_size=40), json_scalars),
    ),
    "type": mostly(
        st.sampled_from(["ask", "chat", "ack", "reply", "system"]), st.text(max_size=10)
    ),
    "body": mostly(st.text(max_size=200), json_values),
    "data": mostly(
        st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=5)),
        json_values,
    ),
    "in_reply_to": mostly(st.one_of(st.none(), tokens), st.text(max_size=20)),
    "thread": mostly(st.one_of(st.none(), tokens), st.text(max_size=20)),
    "sig": st.one_of(
        st.none(),
        json_values,
        st.fixed_dictionaries(
            {"ts": st.integers(), "nonce": st.text(max_size=70), "value": st.text(max_size=300)}
        ),
    ),
    "proof": st.one_of(
        st.none(),
        json_values,
        st.fixed_dictionaries(
            {"ts": st.integers(), "nonce": st.text(max_size=70), "hmac": st.text(max_size=70)}
        ),
    ),
    "seq": st.integers(),
    "verified": st.booleans(),
    "extra": json_values,
}
OPTIONAL = ["data", "in_reply_to", "thread"]
HOSTILE = ["sig", "proof", "seq", "verified", "extra"]


@st.composite
def posts(draw: st.DrawFn) -> bytes:
    """A near-valid post as JSON text, sometimes with one forbidden token spliced in."""
    names = ["from", "to", "type", "body"]
    obj = {name: draw(field_values[name]) for name in names if draw(st.integers(0, 19)) > 0}
    for name in OPTIONAL:
        if draw(st.booleans()):
            obj[name] = draw(field_values[name])
    if draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(HOSTILE))
        obj[name] = draw(field_values[name])
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    how = draw(st.integers(0, 11))
    if how == 0 and text.endswith("}"):  # a forbidden value in data (or anywhere)
        text = (
            text[:-1]
            + ("," if len(obj) else "")
            + f'"data":{{"x":{draw(st.sampled_from(FORBIDDEN))}}}}}'
        )
    elif how == 1 and text.endswith("}") and obj:  # a duplicate key
        key = draw(st.sampled_from(list(obj)))
        text = text[:-1] + f",{json.dumps(key)}:{json.dumps(obj[key])}}}"
    elif how == 2:  # a forbidden token anywhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(FORBIDDEN)) + text[at:]
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 19)) == 0:  # a few random bytes flipped
        blob = bytearray(raw)
        for _ in range(draw(st.integers(1, 3))):
            if blob:
                blob[draw(st.integers(0, len(blob) - 1))] = draw(st.integers(0, 255))
        raw = bytes(blob)
    return raw


def sizes(soak: bool) -> int:
    return 5000 if soak else 400
