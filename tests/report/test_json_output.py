from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qdqkit.report.json_output import dumps_json, json_number, to_jsonable


class Colour(enum.Enum):
    RED = "red"


@dataclass
class Sample:
    name: str
    snr_db: float
    tags: set[str] = field(default_factory=set)
    where: Path = Path("a/b")
    colour: Colour = Colour.RED
    missing: float | None = None


def test_non_finite_numbers_are_strings_and_null_means_unknown() -> None:
    assert [json_number(v) for v in (1.5, math.inf, -math.inf, math.nan)] == [
        1.5, "inf", "-inf", "nan"]
    data = json.loads(dumps_json(Sample("x", math.inf, {"b", "a"})))
    assert data == {"name": "x", "snr_db": "inf", "tags": ["a", "b"], "where": "a/b",
                    "colour": "red", "missing": None}


@dataclass
class Published:
    internal: int = 1

    def to_json(self) -> dict[str, object]:
        return {"shown": self.internal * 2, "ratio": math.nan}


def test_an_object_with_to_json_is_written_as_what_it_returns() -> None:
    assert to_jsonable([Published()]) == [{"shown": 2, "ratio": "nan"}]


def test_numpy_scalars_and_nested_containers() -> None:
    value = {"a": (np.float32(0.5), np.int64(3)), 1: [np.float64(np.nan)]}
    assert to_jsonable(value) == {"a": [0.5, 3], "1": ["nan"]}
    assert dumps_json([1.0]) == "[\n  1.0\n]\n"
