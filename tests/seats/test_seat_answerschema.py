"""The strict JSON schema a seat sends, made from a step's pydantic schema."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from agents.seats.answerschema import answer_schema


class Item(BaseModel):
    text: str = Field(max_length=2000)
    note: str = Field(default="", max_length=80)


class Answer(BaseModel):
    items: list[Item] = Field(max_length=5000)
    flag: bool | None = None
    hint: ClassVar[list[str]] = ["a", "b"]

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        schema["$defs"]["Item"]["properties"]["text"]["enum"] = cls.hint
        return schema


def test_every_object_is_closed_and_fully_required() -> None:
    """Defaults dropped and every property required (OpenAI's strict mode); titles dropped."""
    sent = answer_schema(Answer)
    assert sent.name == "Answer"
    item = sent.schema["$defs"]["Item"]
    assert item["additionalProperties"] is False and item["required"] == ["text", "note"]
    assert sent.schema["required"] == ["items", "flag"]
    assert "default" not in str(sent.schema) and "title" not in sent.schema


def test_huge_bounds_are_dropped_small_ones_kept() -> None:
    """A bound llama.cpp would expand into thousands of grammar rules is left to max_tokens."""
    sent = answer_schema(Answer).schema
    item = sent["$defs"]["Item"]["properties"]
    assert "maxLength" not in item["text"] and item["note"]["maxLength"] == 80
    assert "maxItems" not in sent["properties"]["items"]


def test_a_schema_may_refine_what_is_sent() -> None:
    assert answer_schema(Answer).schema["$defs"]["Item"]["properties"]["text"]["enum"] == [
        "a",
        "b",
    ]


def test_a_name_is_what_openai_accepts() -> None:
    odd = type("Odd Name!", (BaseModel,), {"__annotations__": {"x": int}})
    assert answer_schema(odd).name == "Odd_Name_"
