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
be half a million), and the step's max_tokens bounds the answer anyway.

A step's schema may say more to the server than its validators can say as
a JSON schema — the batch's ids, how many terms — with a classmethod
`sent_schema(schema) -> schema` that refines pydantic's schema (a hint for
the decoding; the validators still judge the answer).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from agents.seats.request import AnswerSchema

__all__ = ["answer_schema", "strict_schema"]

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_DROPPED = ("default", "title")
_BOUNDS = ("maxLength", "maxItems")
LARGEST_BOUND = 1000
NAME_MAX = 64  # OpenAI's limit on json_schema.name


def strict_schema(schema: Any) -> Any:
    """A copy of `schema` with every object closed and fully required, defaults dropped."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED or (key in _BOUNDS and isinstance(value, int) and value > LARGEST_BOUND):
            continue
        if key in ("properties", "$defs"):  # maps of names to schemas, not schemas
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        else:
            out[key] = strict_schema(value)
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
    return AnswerSchema(name=name, schema=strict_schema(schema))
