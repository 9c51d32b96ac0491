"""The hub's OpenAPI 3.1 description, written by hand to match room.message."""

from __future__ import annotations

from typing import Any

from room.message import MAX_BODY_BYTES, MESSAGE_TYPES, NICK_PATTERN

MAX_AFTER = 1 << 62  # the largest seq /read accepts in `after`
MAX_READ_SENDERS = 64  # how many times /read accepts `from` (a set of senders)

_NONCE = {"type": "string", "minLength": 8, "maxLength": 64, "pattern": "^[A-Za-z0-9_-]+$"}
_TOKEN = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}$"}

_POST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["from", "to", "type", "body"],
    # a post proves itself with the shared secret or its own key, never both
    "not": {
        "required": ["proof", "sig"],
        "properties": {"proof": {"type": "object"}, "sig": {"type": "object"}},
    },
    "properties": {
        "from": {"type": "string", "pattern": f"^{NICK_PATTERN}$"},
        "to": {"type": "string", "pattern": f"^@?{NICK_PATTERN}$"},
        "type": {"type": "string", "enum": list(MESSAGE_TYPES)},
        "body": {"type": "string", "maxLength": MAX_BODY_BYTES},
        "data": {"type": ["object", "null"]},
        "in_reply_to": {"anyOf": [_TOKEN, {"type": "null"}]},
        "thread": {"anyOf": [_TOKEN, {"type": "null"}]},
        "sig": {
            "anyOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["ts", "nonce", "value"],
                    "properties": {
                        "ts": {"type": "integer"},
                        "nonce": _NONCE,
                        "value": {"type": "string", "minLength": 1, "maxLength": 256},
                    },
                },
                {"type": "null"},
            ]
        },
        "proof": {
            "anyOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["ts", "nonce", "hmac"],
                    "properties": {
                        "ts": {"type": "integer"},
                        "nonce": _NONCE,
                        "hmac": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    },
                },
                {"type": "null"},
            ]
        },
    },
}

_LINE: dict[str, Any] = {
    "type": "object",
    "required": ["seq", "id", "ts", "from", "to", "type", "body", "verified", "prev"],
    "properties": {
        "seq": {"type": "integer", "minimum": 1},
        "id": {"type": "string"},
        "ts": {"type": "string"},
        "from": {"type": "string"},
        "to": {"type": "string"},
        "type": {"type": "string"},
        "body": {"type": "string"},
        "data": {"type": ["object", "null"]},
        "in_reply_to": {"type": ["string", "null"]},
        "thread": {"type": ["string", "null"]},
        "sig": {"type": ["object", "null"]},
        "verified": {"type": "boolean"},
        "via": {"enum": ["relaxed"], "description": "how a proofless verified post was admitted"},
        "nonce": {
            "type": "string",
            "description": "the nonce of the shared-secret proof the post carried (never its "
            "HMAC): the hub refuses it again, across restarts, from the room itself",
        },
        "prev": {"type": "string"},
    },
}

_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "malformed post or parameters",
        401: "missing or wrong proof or token",
        413: "body or data too large",
        403: "the witness key is not in [hub] witnesses, or is the hub's own",
        409: "the cosigned checkpoint is not the hub's current one: fetch it again",
        429: "a poster is over its rate ([hub] unverified_*, verified_*); see retry_after_s "
        "and the Retry-After header",
        503: "the room cannot accept writes",
        507: "the room's disk is under [hub] min_free_disk_bytes (unverified posts refused) "
        "or verified_min_free_disk_bytes (every post refused)",
    }
    return {str(code): _json(_ERROR, text[code]) for code in codes}


_PROOF = {
    "type": "object",
    "required": ["proof"],
    "properties": {"proof": {"type": "array", "items": {"type": "string", "format": "byte"}}},
}


def _whole(name: str, required: bool, text: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": {"type": "integer", "minimum": 0},
        "description": text,
    }


def _tlog_paths() -> dict[str, Any]:
    """The Merkle tree's endpoints (room/tlogapi.py, docs/audit.md); all need the read token."""
    reader: dict[str, Any] = {"security": [{"bearer": []}]}
    proof = {"200": _json(_PROOF, "an RFC 9162 proof, base64 hashes"), **_errors(400, 401)}
    return {
        "/tlog/checkpoint": {
            "get": {
                **reader,
                "responses": {
                    "200": {
                        "description": "the latest C2SP signed checkpoint, with cosignatures",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors(401),
                },
            }
        },
        "/tlog/proof/inclusion": {
            "get": {
                **reader,
                "parameters": [
                    _whole("seq", True, "the line"),
                    _whole("size", False, "the tree size (default: the latest checkpoint's)"),
                ],
                "responses": proof,
            }
        },
        "/tlog/proof/consistency": {
            "get": {
                **reader,
                "parameters": [
                    _whole("from", True, "the older tree size"),
                    _whole("to", False, "the newer tree size (default: the latest checkpoint's)"),
                ],
                "responses": proof,
            }
        },
        "/tlog/cosign": {
            "post": {
                **reader,
                "requestBody": {
                    "required": True,
                    **_json(
                        {
                            "type": "object",
                            "required": ["checkpoint", "witness_key"],
                            "properties": {
                                "checkpoint": {"type": "string"},
                                "witness_key": {"type": "string"},
                            },
                        },
                        "the current checkpoint with the witness's cosignature line",
                    ),
                },
                "responses": {
                    "200": _json({"type": "object"}, "kept, replacing that witness's older one"),
                    **_errors(400, 401, 403, 409, 413),
                },
            }
        },
    }


def _objects_path() -> dict[str, Any]:
    """PUT and GET /objects/{sha256} (room/objectstore.py)."""
    name = {
        "name": "sha256",
        "in": "path",
        "required": True,
        "description": "the SHA-256 of the object's bytes, lowercase hex",
        "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    }
    octets = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    refusals = {
        "400": _json(_ERROR, "the name is not a SHA-256, or the body does not hash to it"),
        "401": _json(_ERROR, "missing or wrong proof or token"),
        "403": _json(_ERROR, "the poster is not verified: only privileged nicks store objects"),
        "404": _json(_ERROR, "no such object (or this hub keeps none: a JetStream room)"),
        "413": _json(_ERROR, "the object is over [objects] max_bytes; nothing was stored"),
        "507": _json(_ERROR, "storing it would take the disk under [hub] min_free_disk_bytes"),
    }
    return {
        "/objects/{sha256}": {
            "parameters": [name],
            "get": {
                "security": [{"bearer": []}],  # the read token on the strict listener
                "responses": {
                    "200": {"description": "the object's bytes", "content": octets},
                    **{code: refusals[code] for code in ("400", "401", "404")},
                },
            },
            "put": {
                "description": "Store an object (verified posters only). The "
                "X-Bullpen-Proof header carries a post proved as for /say, base64url: "
                "from the nick, to @hub, type system, body 'PUT /objects/<sha256>', "
                "data {sha256, bytes}.",
                "parameters": [
                    {
                        "name": "X-Bullpen-Proof",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "maxLength": 4096},
                    }
                ],
                "requestBody": {"required": True, "content": octets},
                "responses": {
                    "201": _json(
                        {
                            "type": "object",
                            "required": ["sha256", "bytes"],
                            "properties": {
                                "sha256": {"type": "string"},
                                "bytes": {"type": "integer"},
                                "stored_by": {"type": "string"},
                            },
                        },
                        "stored (or already stored: same name, same bytes)",
                    ),
                    **refusals,
                },
            },
        }
    }


def schema(listener: str) -> dict[str, Any]:
    security: list[dict[str, list[str]]] = [{"bearer": []}] if listener == "relaxed" else []
    auth = (401,) if listener == "relaxed" else ()
    query = [
        {
            "name": "after",
            "in": "query",
            "description": "lines with a larger seq only; with wait, a long-poll from "
            "max(after, head): a line at or below after is never returned",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_AFTER},
        },
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
        {"name": "wait", "in": "query", "schema": {"type": "number", "minimum": 0, "maximum": 60}},
        {"name": "thread", "in": "query", "schema": {"type": "string"}},
        {
            "name": "to",
            "in": "query",
            "schema": {"type": "string", "pattern": f"^@?{NICK_PATTERN}$"},
        },
        {
            "name": "from",
            "in": "query",
            "description": "once: lines from that nick; repeated: from any of them",
            "style": "form",
            "explode": True,
            "schema": {
                "type": "array",
                "maxItems": MAX_READ_SENDERS,
                "items": {"type": "string", "pattern": f"^@?{NICK_PATTERN}$"},
            },
        },
        {
            "name": "verified",
            "in": "query",
            "description": "true: only lines the gate verified; false: only the others",
            "schema": {"type": "boolean"},
        },
    ]
    return {
        "openapi": "3.1.0",
        "info": {"title": f"bullpen hub ({listener} listener)", "version": "1"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": security,
        "paths": {
            "/say": {
                "post": {
                    "requestBody": {"required": True, **_json(_POST, "a post")},
                    "responses": {
                        "200": _json(_LINE, "the stored line"),
                        **_errors(400, 401, 413, 429, 503, 507),
                    },
                }
            },
            "/read": {
                "get": {
                    # the strict listener reads only with the read token (trust.toml read_token_file)
                    "security": [{"bearer": []}],
                    "parameters": query,
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["messages", "last_seq"],
                                "properties": {
                                    "messages": {"type": "array", "items": _LINE},
                                    "last_seq": {"type": "integer"},
                                },
                            },
                            "matching lines (at most [hub] read_max_bytes of them) and the seq "
                            "they cover",
                        ),
                        **_errors(400, 401),
                    },
                }
            },
            "/health": {
                "get": {
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["ok", "version", "listener", "seq", "head"],
                                "properties": {
                                    "ok": {"type": "boolean"},
                                    "version": {
                                        "type": "string",
                                        "description": "the bullpen version the hub runs",
                                    },
                                    "listener": {"type": "string"},
                                    "seq": {"type": "integer"},
                                    "head": {"type": "string"},
                                },
                            },
                            "the hub is up",
                        ),
                        **_errors(503, *auth),
                    }
                }
            },
            **_tlog_paths(),
            **_objects_path(),
        },
    }
