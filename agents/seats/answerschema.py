"""A step's pydantic schema as the JSON schema a server constrains its decoding to.

The judge validates every answer against the step's pydantic model; this
module turns the same model into what an OpenAI-compatible server accepts
as `response_format = {"type": "json_schema", ...}` (OpenAI, vLLM, Ollama,
llama.cpp's grammar-constrained decoding). It is the strict form: every
object closes (`additionalProperties: false`) and names every property as
required, and `default`/`title` are dropped, because OpenAI's strict mode
wants exactly that and a grammar built from a closed schema leaves a weak
model no room to run on with keys of its own. What pydantic validators
check beyond the shape (no term sharing a word with the keyword, every id
scored once) stays the judge's check: a schema constrains the shape only.
A `maxLength` or `maxItems` above LARGEST_BOUND is dropped: llama.cpp
expands a bound into as many grammar rules (a file's 512 KiB content would
be half a million), and the step's max_tokens bounds the answer anyway. It
is never dropped silently: the sent schema names every bound it loosened
(`AnswerSchema.loosened`), and the openai seat's request log line says so.

`worst_case_tokens` is the most tokens an answer held to the sent schema
can take, so a step can ask for a `max_tokens` its answer always fits in
(a weak model that runs to every bound is then never cut off mid-JSON).

A step's schema may say more to the server than its validators can say as
a JSON schema — the batch's ids, how many terms — with a classmethod
`sent_schema(schema) -> schema` that refines pydantic's schema (a hint for
the decoding; the validators still judge the answer).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from agents.seats.request import AnswerSchema

__all__ = ["answer_schema", "strict_schema", "worst_case_tokens"]

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_DROPPED = ("default", "title")
_BOUNDS = ("maxLength", "maxItems")
LARGEST_BOUND = 1000
NAME_MAX = 64  # OpenAI's limit on json_schema.name


def strict_schema(schema: Any, loosened: list[str] | None = None, where: str = "") -> Any:
    """A copy of `schema` with every object closed and fully required, defaults dropped;
    each bound over LARGEST_BOUND it drops is named in `loosened` (a JSON pointer)."""
    if isinstance(schema, list):
        return [strict_schema(item, loosened, f"{where}/{n}") for n, item in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _BOUNDS and isinstance(value, int) and value > LARGEST_BOUND:
            if loosened is not None:
                loosened.append(f"{where or '/'} {key} {value}")
            continue
        if key in ("properties", "$defs"):  # maps of names to schemas, not schemas
            out[key] = {
                name: strict_schema(sub, loosened, f"{where}/{key}/{name}")
                for name, sub in value.items()
            }
        else:
            out[key] = strict_schema(value, loosened, f"{where}/{key}")
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    return out


def answer_schema(model: type[BaseModel]) -> AnswerSchema:
    """The strict JSON schema of `model`, named after it (as OpenAI allows a name)."""
    name = _NAME_CHARS.sub("_", model.__name__)[:NAME_MAX] or "answer"
    schema = model.model_json_schema()
    refine = getattr(model, "sent_schema", None)
    if callable(refine):
        schema = refine(schema)
    loosened: list[str] = []
    sent = strict_schema(schema, loosened)
    return AnswerSchema(name=name, schema=sent, loosened=tuple(loosened))


# llama.cpp's grammar lets a run of whitespace (a newline and up to twenty spaces or tabs)
# stand at each place JSON allows it; a tokenizer spends one to three tokens on such a run.
SEPARATOR_TOKENS = 3
NUMBER_TOKENS = 17  # llama.cpp's grammar bounds an integer to 16 digits and its sign


def worst_case_tokens(schema: dict[str, Any]) -> int | None:
    """The most tokens an answer held to `schema` can take, counting a token per character
    of a string (a tokenizer never spends fewer on plain text; escapes and non-ASCII can cost
    more) and SEPARATOR_TOKENS per place whitespace may stand; None when anything in it is
    unbounded (a string with no maxLength, an array with no maxItems)."""
    defs = schema.get("$defs", {})
    try:
        return _worst(schema, defs, 0)
    except _Unbounded:
        return None


class _Unbounded(Exception):
    pass


def _worst(node: Any, defs: dict[str, Any], depth: int) -> int:
    if not isinstance(node, dict) or depth > 32:
        raise _Unbounded
    if "$ref" in node:
        return _worst(defs[str(node["$ref"]).rsplit("/", 1)[-1]], defs, depth + 1)
    if "enum" in node:
        return max(len(json.dumps(value)) for value in node["enum"]) + SEPARATOR_TOKENS
    if "const" in node:
        return len(json.dumps(node["const"])) + SEPARATOR_TOKENS
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        return max(_worst(option, defs, depth + 1) for option in options)
    kind = node.get("type")
    if isinstance(kind, list):
        return max(_worst({**node, "type": one}, defs, depth + 1) for one in kind)
    if kind == "string":
        if "maxLength" not in node:
            raise _Unbounded
        return int(node["maxLength"]) + 2 + SEPARATOR_TOKENS
    if kind in ("integer", "number"):
        bounds = [node.get(k) for k in ("minimum", "maximum")]
        if kind == "integer" and all(isinstance(b, int) for b in bounds):
            return max(len(str(b)) for b in bounds) + SEPARATOR_TOKENS
        return NUMBER_TOKENS + SEPARATOR_TOKENS
    if kind == "boolean":
        return len("false") + SEPARATOR_TOKENS
    if kind == "null":
        return len("null") + SEPARATOR_TOKENS
    if kind == "array":
        if "maxItems" not in node:
            raise _Unbounded
        item = _worst(node.get("items", {}), defs, depth + 1)
        return 2 + SEPARATOR_TOKENS + int(node["maxItems"]) * (item + 1 + SEPARATOR_TOKENS)
    if kind == "object":
        total = 2 + SEPARATOR_TOKENS
        for name, sub in (node.get("properties") or {}).items():
            total += len(json.dumps(name)) + 2 + 2 * SEPARATOR_TOKENS + _worst(sub, defs, depth + 1)
        return total
    raise _Unbounded
