"""The message: what a poster sends, and the line the hub stores.

A poster sets `from`, `to`, `type`, `body` and optionally `data`,
`in_reply_to`, `thread` and `sig`; the hub alone sets `seq`, `id`, `ts`,
`verified`, `via`, `nonce` and `prev`. `via` is there only on a verified line the
hub admitted without any proof it could keep (`"relaxed"`: through the
relaxed listener's token), so an audit can tell such a line from a forgery.
`nonce` is there only on a line whose post carried a shared-secret proof: the
proof's nonce (never its HMAC), so the hub rebuilds the nonces it must refuse
from the room itself (trust/nonces.py). Checking the raw keys first, before any
model, lets every rejection name the exact field and what to do about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from room import strictjson
from room.errors import BadPost, Unauthorized

NICK_PATTERN = r"[a-z][a-z0-9_-]{0,31}"
NONCE_PATTERN = r"^[A-Za-z0-9_-]+$"  # a proof's nonce: 8-64 of these
_NICK = re.compile(NICK_PATTERN)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}")

MessageType = Literal["ask", "chat", "ack", "reply", "system"]
MESSAGE_TYPES: tuple[str, ...] = ("ask", "chat", "ack", "reply", "system")

HUB_FIELDS = ("seq", "id", "ts", "verified", "via", "nonce", "prev")
POSTER_FIELDS = ("from", "to", "type", "body", "data", "in_reply_to", "thread", "sig")
REQUEST_FIELDS = (*POSTER_FIELDS, "proof")
LINE_FIELDS = ("seq", "id", "ts", *POSTER_FIELDS, "verified", "via", "nonce", "prev")

VIA_RELAXED = "relaxed"  # admitted verified on the relaxed listener's token, with no proof

MAX_BODY_BYTES = 64 * 1024
MAX_DATA_BYTES = 256 * 1024


def is_nick(value: str) -> bool:
    return bool(_NICK.fullmatch(value))


def check_nick(value: str, field: str = "nick") -> str:
    if not isinstance(value, str) or not _NICK.fullmatch(value):
        raise ValueError(
            f"{field} {value!r} is not a nick: use 1-32 characters, a lowercase letter "
            "first, then lowercase letters, digits, '_' or '-'"
        )
    return value


def normalize_to(value: str) -> str:
    """`foreman` and `@foreman` both address @foreman."""
    if not isinstance(value, str):
        raise ValueError("to must be a string like '@nick'")
    return "@" + check_nick(value.removeprefix("@"), "to")


def bare(address: str) -> str:
    return address.removeprefix("@")


def stored_address(value: str) -> str:
    """`to` as the hub stores it: always '@nick' (a poster may write a bare nick)."""
    if not value.startswith("@"):
        raise ValueError(f"to must be stored as '@nick', got {value[:40]!r}")
    return normalize_to(value)


# The field checks shared by what a poster sends and what an audit holds a stored line to.
FromNick = Annotated[str, AfterValidator(lambda value: check_nick(value, "from"))]
PostedAddress = Annotated[str, AfterValidator(normalize_to)]
StoredAddress = Annotated[str, AfterValidator(stored_address)]


class Signature(BaseModel):
    """An Ed25519 signature a nick made with its own key; it stays in the line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ts: int
    nonce: str = Field(min_length=8, max_length=64, pattern=NONCE_PATTERN)
    value: str = Field(min_length=1, max_length=256)


class HmacProof(BaseModel):
    """Proof of the shared secret; checked by the hub and never stored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ts: int
    nonce: str = Field(min_length=8, max_length=64, pattern=NONCE_PATTERN)
    hmac: str = Field(min_length=64, max_length=64, pattern=r"^[0-9a-f]+$")


class Post(BaseModel):
    """The fields a poster controls."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: FromNick = Field(alias="from")
    to: PostedAddress
    type: MessageType
    body: str
    data: dict[str, Any] | None = None
    in_reply_to: str | None = None
    thread: str | None = None
    sig: Signature | None = None

    @field_validator("in_reply_to", "thread")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is not None and not _TOKEN.fullmatch(value):
            raise ValueError(
                "must be 1-128 characters of letters, digits and ._:@/+- starting with "
                "a letter or digit"
            )
        return value

    def signed_fields(self) -> dict[str, Any]:
        """What a proof or signature covers: every poster field but the signature."""
        return {
            "from": self.from_,
            "to": self.to,
            "type": self.type,
            "body": self.body,
            "data": self.data,
            "in_reply_to": self.in_reply_to,
            "thread": self.thread,
        }


class Message(BaseModel):
    """One stored line of room.jsonl, as readers see it."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    seq: int
    id: str
    ts: str
    from_: str = Field(alias="from")
    to: str
    type: str
    body: str
    data: dict[str, Any] | None = None
    in_reply_to: str | None = None
    thread: str | None = None
    sig: dict[str, Any] | None = None
    verified: bool = False
    via: str | None = None
    nonce: str | None = None  # a shared-secret proof's nonce (never its HMAC)
    prev: str = ""

    def to_dict(self) -> dict[str, Any]:
        fields = self.model_dump(by_alias=True)
        for optional in ("via", "nonce"):  # the hub writes them only where they matter
            if fields[optional] is None:
                del fields[optional]
        return fields

    def addressed_to(self, nick: str) -> bool:
        return bare(self.to) == nick


class PostRequest:
    """A validated /say request: the post and its optional HMAC proof."""

    __slots__ = ("post", "proof")

    def __init__(self, post: Post, proof: HmacProof | None) -> None:
        self.post = post
        self.proof = proof


def _explain(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "post"
    where = "from" if where == "from_" else where
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "literal_error" and where == "type":
        message = f"type must be one of {', '.join(MESSAGE_TYPES)}"
    return f"{where}: {message}"


def parse_request(raw: bytes, screen: Callable[[bytes], None] | None = None) -> PostRequest:
    """Turn a /say body into a PostRequest, or raise BadPost naming the problem.

    `screen` sees the raw bytes and the decoded JSON before anything is
    echoed in an error, so it can refuse content that must never be stored
    or repeated (the hub's own secrets, however they were escaped).
    """
    if screen is not None:
        screen(raw)
    try:
        obj = strictjson.loads(raw)
    except strictjson.JsonRejected as exc:
        raise BadPost(f"the request body is not acceptable JSON: {exc}") from None
    if screen is not None:
        stored = strictjson.dumps(obj).encode("utf-8")
        if stored != raw:  # the same bytes were screened above (a compact body: our clients')
            screen(stored)
    return parse_request_obj(obj)


def parse_request_obj(obj: Any) -> PostRequest:
    if not isinstance(obj, dict):
        raise BadPost("the request body must be a JSON object with from, to, type and body")
    for key in obj:
        if key in HUB_FIELDS:
            raise BadPost(
                f"field {key!r} is set by the hub, never by a poster; remove it",
                field=key,
            )
        if key not in REQUEST_FIELDS:
            raise BadPost(
                f"unknown field {key!r}; a post may have {', '.join(REQUEST_FIELDS)}",
                field=key,
            )
    for key in ("from", "to", "type", "body"):
        if key not in obj:
            raise BadPost(f"field {key!r} is required", field=key)
    body = obj["body"]
    if isinstance(body, str) and len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise BadPost(
            f"body is over {MAX_BODY_BYTES // 1024} KiB; put large content in a file "
            "and post its path",
            status=413,
            field="body",
        )
    data = obj.get("data")
    if data is not None and len(strictjson.dumps(data).encode("utf-8")) > MAX_DATA_BYTES:
        raise BadPost(
            f"data is over {MAX_DATA_BYTES // 1024} KiB; put large content in a file "
            "and post its path",
            status=413,
            field="data",
        )
    proof_obj = obj.get("proof")
    fields = {key: value for key, value in obj.items() if key != "proof"}
    try:
        post = Post.model_validate(fields)
    except ValidationError as exc:
        if exc.errors()[0]["loc"][:1] == ("sig",):  # a malformed signature is a wrong one
            raise Unauthorized(f"the signature is malformed: {_explain(exc)}") from None
        raise BadPost(_explain(exc)) from None
    try:
        proof = None if proof_obj is None else HmacProof.model_validate(proof_obj)
    except ValidationError as exc:  # a malformed proof is a wrong one
        raise Unauthorized(f"the proof is malformed: proof.{_explain(exc)}") from None
    return PostRequest(post, proof)


def _line_object(raw: bytes | str) -> dict[str, Any]:
    try:
        obj = strictjson.loads(raw)
    except strictjson.JsonRejected as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(obj, dict):
        raise ValueError("a room line must be a JSON object")
    return obj


def parse_line(raw: bytes | str) -> Message:
    """Parse one stored line; raise ValueError when it is not a room message."""
    obj = _line_object(raw)
    try:
        return Message.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(_explain(exc)) from None


class _AuditedLine(Message):
    """A stored line held to the hub's rules: types exact, no field the hub never writes."""

    model_config = ConfigDict(extra="forbid", strict=True)

    seq: int = Field(ge=1)
    id: str = Field(min_length=1)
    ts: str = Field(min_length=1)
    type: MessageType
    from_: FromNick = Field(alias="from")
    to: StoredAddress
    via: Literal["relaxed"] | None = None
    nonce: str | None = Field(default=None, min_length=8, max_length=64, pattern=NONCE_PATTERN)


def check_stored(raw: bytes) -> Message:
    """Parse one line and hold it to what the hub writes; raise ValueError if it cannot be.

    Readers parse leniently (`parse_line`); an audit must not: a line with a
    field, a type or an address the hub could not have written was forged or
    edited, even when someone rebuilt the chain over it.
    """
    obj = _line_object(raw)
    try:
        return _AuditedLine.model_validate(obj)  # a Message, validated once
    except ValidationError as exc:
        raise ValueError(_explain(exc)) from None
