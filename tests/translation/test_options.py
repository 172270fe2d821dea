"""TranslateOptions: the weight-scale check is named for what it does; the reference spelling stays."""

from __future__ import annotations

from qdqkit.translation import TranslateOptions


def test_calibration_type_switches_the_weight_scale_check() -> None:
    assert TranslateOptions().check_weight_scales
    assert TranslateOptions(calibration_type="max").check_weight_scales
    assert not TranslateOptions(calibration_type="histogram").check_weight_scales
    assert not TranslateOptions(check_weight_scales=False).check_weight_scales
