"""Which ``--exportProfile`` statistic times a layer: ``LayerTiming`` decides, every reader asks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qdqkit.trt.engine_json import read_engine_graph
from qdqkit.trt.engine_profile import LayerTiming, parse_profile, profile_measure
from tests.engine.fixture_files import graph_path, raw_profile


def _timing(median: float | None, average: float | None) -> LayerTiming:
    return LayerTiming("conv", median_ms=median, average_ms=average, time_ms=None,
                       percentage=None)


@pytest.mark.parametrize(("median", "average", "best", "measure"), [
    (0.5, 0.7, 0.7, "averageMs"),  # both written (TensorRT 8.2+): the average
    (None, 0.7, 0.7, "averageMs"),  # the average only
    (0.5, None, 0.5, "medianMs"),  # no average: the median stands in
    (None, None, None, None),
])
def test_a_layer_is_timed_by_its_average_else_its_median(
    median: float | None, average: float | None, best: float | None, measure: str | None
) -> None:
    timing = _timing(median, average)
    assert timing.best_ms == best
    assert timing.measure == measure


def test_the_profile_measure_names_every_field_used() -> None:
    assert profile_measure([_timing(0.5, 0.7), _timing(None, 0.2)]) == "averageMs"
    assert profile_measure([_timing(0.5, None)]) == "medianMs"
    assert profile_measure([_timing(0.5, 0.7), _timing(0.5, None)]) == "averageMs or medianMs"
    assert profile_measure([]) == "averageMs"


def test_parsed_records_keep_both_statistics() -> None:
    data = [{"count": 10}, {"name": "conv", "averageMs": 0.7, "medianMs": 0.5}]
    (timing,) = parse_profile(data, "x.profile.json")
    assert (timing.average_ms, timing.median_ms, timing.best_ms) == (0.7, 0.5, 0.7)


def test_the_reader_times_layers_as_layer_timing_says(tmp_path: Path) -> None:
    """The QAT profile with medians made unlike the averages, and one record without its average."""
    header, *records = raw_profile("qat")
    for record in records:
        record["medianMs"] = record["averageMs"] + 1.0
    del records[0]["averageMs"]
    path = tmp_path / "mixed.profile.json"
    path.write_text(json.dumps([header, *records]))
    graph = read_engine_graph(graph_path("qat"), profile=path)
    by_name = {layer.name: layer for layer in graph.layers}
    assert by_name[records[0]["name"]].latency_ms == records[0]["medianMs"]
    for record in records[1:]:
        assert by_name[record["name"]].latency_ms == record["averageMs"]
    assert graph.metadata["profile_measure"] == "averageMs or medianMs"
    expected = records[0]["medianMs"] + sum(r["averageMs"] for r in records[1:])
    assert graph.metadata["profile_ms"] == pytest.approx(expected, abs=1e-6)
