"""verify: the emulation must reproduce a faithful translation and expose an unfaithful one."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdqkit.core.errors import QdqkitError
from qdqkit.examples.builder import demo_network
from qdqkit.translation import translate
from qdqkit.trt.calib_cache import format_calib_cache, read_calib_cache
from qdqkit.verification import fake_quantize_weight, verify


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("verify")
    source = folder / "demo.onnx"
    onnx.save(demo_network("trt"), source)
    translate(source, folder / "out")
    return source, folder / "out"


def test_faithful_translation_scores_high(bundle: tuple[Path, Path]) -> None:
    source, out = bundle
    result = verify(source, out)
    assert result.min_snr_db > 60 and result.outputs[0].cosine > 0.9999
    assert result.quantized_weights == 6 and result.config_matches_cache
    assert "logits" in result.unscaled_tensors


def test_a_wrong_scale_in_the_cache_is_caught(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    source, out = bundle
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    cache_path = broken / "demo_precision_config_calib.cache"
    cache = read_calib_cache(cache_path)
    first = next(iter(cache.scales))
    cache.scales[first] *= 8  # one tensor's range 8x too wide: much coarser INT8 steps
    cache_path.write_text(format_calib_cache(cache.scales, cache.version))
    result = verify(source, broken)
    assert result.min_snr_db < verify(source, out).min_snr_db - 10
    assert not result.config_matches_cache


def test_npz_inputs(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    source, out = bundle
    data = np.random.default_rng(5).uniform(-1, 1, size=(3, 1, 3, 32, 32)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=data)
    result = verify(source, out, tmp_path / "in.npz")
    assert result.samples == 3 and result.min_snr_db > 60


def test_missing_bundle_is_a_clear_error(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(QdqkitError, match=r"no demo_noqdq\.onnx"):
        verify(bundle[0], tmp_path)


def test_weight_fake_quant_is_per_output_channel_max() -> None:
    w = np.array([[1.0, -0.5, 0.26], [0.0, 0.0, 0.0], [-3.0, 2.0, 0.01]], np.float32)
    q = fake_quantize_weight(w, 0)
    assert q[0, 0] == 1.0 and q[2, 0] == -3.0 and np.all(q[1] == 0)
    assert np.allclose(q[0], np.round(w[0] * 127) / 127, atol=1e-7)
    assert np.allclose(fake_quantize_weight(w.T.copy(), 1), q.T)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=st.integers(1, 3), width=st.sampled_from([4, 8]), seed=st.integers(0, 1000),
       style=st.sampled_from(["trt", "modelopt"]))
def test_translate_then_reapply_scales_reproduces_the_qdq_model(
    tmp_path: Path, blocks: int, width: int, seed: int, style: str
) -> None:
    folder = tmp_path / f"{style}_{blocks}_{width}_{seed}"
    folder.mkdir()
    source = folder / "m.onnx"
    onnx.save(demo_network(style, blocks=blocks, width=width, seed=seed), source)
    translate(source, folder / "out")
    result = verify(source, folder / "out", samples=2)
    assert result.min_snr_db >= (40 if style == "modelopt" else 80)


def test_unary_scales_are_not_emulated_as_quantization(tmp_path: Path) -> None:
    from qdqkit.translation import TranslateOptions

    source = tmp_path / "m.onnx"
    onnx.save(demo_network("trt"), source)
    result = translate(source, tmp_path / "out", TranslateOptions(add_unary_ew_scales_for_dla=True))
    assert result.unary_scales, "the demo's conv2 outputs feed residual Adds with scaled skips"
    check = verify(source, tmp_path / "out")
    assert sorted(check.unary_tensors) == sorted(result.unary_scales)
    assert check.min_snr_db > 60
