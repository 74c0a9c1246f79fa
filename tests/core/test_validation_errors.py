"""One formatter for pydantic validation errors: field paths and messages, never values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from llamon_agent.core.validation_errors import (
    error_path,
    format_validation_error,
    validation_problems,
)

SRC = Path(__file__).parents[2] / "src" / "llamon_agent"


class Item(BaseModel):
    name: str


class Order(BaseModel):
    retries: int
    items: list[Item]

    @model_validator(mode="after")
    def _not_empty(self) -> Order:
        if not self.items:
            raise ValueError("an order needs items")
        return self


def _error(value: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        Order.model_validate(value)
    return info.value


@pytest.mark.parametrize(
    ("loc", "path"),
    [((), ""), (("a",), "a"), (("items", 0, "name"), "items[0].name"), ((0, "x"), "[0].x")],
)
def test_error_path(loc: tuple[int | str, ...], path: str) -> None:
    assert error_path(loc) == path


def test_problems_name_paths_and_messages_without_values() -> None:
    exc = _error({"retries": "many-secret", "items": [{"name": 1}]})
    assert validation_problems(exc) == [
        ("retries", "Input should be a valid integer, unable to parse string as an integer"),
        ("items[0].name", "Input should be a valid string"),
    ]
    assert "many-secret" not in format_validation_error(exc)


def test_format_joins_distinct_problems_and_names_the_whole_value() -> None:
    exc = _error({"retries": 1, "items": []})
    assert format_validation_error(exc) == "$: Value error, an order needs items"
    assert format_validation_error(exc, whole="card") == "card: Value error, an order needs items"


def test_no_second_formatter_in_the_package() -> None:
    copies = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name != "validation_errors.py"
        and "['msg']" in path.read_text(encoding="utf-8").replace('"msg"', "'msg'")
    ]
    assert copies == []
