from __future__ import annotations

from qdqkit.report.text import macs, milliseconds, share, shorten, table


def test_table_pads_columns_and_underlines_the_header() -> None:
    assert table([["a", 1], ["long name", 22]], ["name", "n"]) == (
        "name       n\n---------  --\na          1\nlong name  22"
    )
    assert table([]) == ""


def test_number_formats() -> None:
    assert (milliseconds(None), milliseconds(0.12345)) == ("-", "0.123")
    assert (share(None), share(0.384)) == ("-", "38%")
    assert [macs(n) for n in (None, 999, 58_050_000_000, 2_500_000, 1_500)] == [
        "?", "999", "58.05 G", "2.50 M", "1.50 k"]
    assert shorten("abcdefgh", 8) == "abcdefgh" and shorten("abcdefghi", 8) == "a...fghi"
    # Names of one engine share their start: the end tells them apart.
    names = [f"StatefulPartitionedCall/model/stage3_block{b}_conv2/Conv2D" for b in (1, 2)]
    assert len({shorten(n, 30) for n in names}) == 2
