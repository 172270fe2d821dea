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
from qdqkit.examples.graph import GraphBuilder
from qdqkit.translation import translate
from qdqkit.trt.calib_cache import format_calib_cache, read_calib_cache
from qdqkit.verification import fake_quantize_weight, verify
from qdqkit.verification.emulation import Source


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
    assert result.samples == 3 and result.min_snr_db > 50 and result.passed


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
    folder.mkdir(exist_ok=True)
    source = folder / "m.onnx"
    onnx.save(demo_network(style, blocks=blocks, width=width, seed=seed), source)
    translate(source, folder / "out")
    result = verify(source, folder / "out", samples=2, split=True)
    assert result.passed and result.min_snr_db >= 40
    steps = {s.source: s.min_snr_db for s in result.loss_sources}
    # The cached activation scales with the weights as TensorRT requantizes them reproduce the
    # Q/DQ model (its weights are max-calibrated); the FP16 layers round in both models.
    assert list(steps) == [Source.ACTIVATIONS.value, Source.WEIGHTS.value]
    assert steps[Source.WEIGHTS.value] == result.min_snr_db >= (40 if style == "modelopt" else 80)
    if style == "trt":  # its logits have no scale: they run FP16, on both sides
        assert result.fp16_tensors > 0 and not result.fp16_unmatched


def _offset_chain(path: Path) -> Path:
    """A conv whose output passes through an unquantized +1000 / -1000 before the next Q: FP16
    holds 1000 + x to within 0.25, so the FP16 layers lose most of x, in any build that runs them
    FP16, and the rounding lands on the next quantizer's grid as whole steps."""
    g = GraphBuilder("offset", seed=5)
    x = g.input("x", [1, 8, 8, 8])
    y = g.conv(g.qdq(x, 0.02, name="x"), 8, 8, name="c1")
    y = g.node("Add", [y, g.const(np.float32(1000.0), "up")], name="up_add")
    y = g.node("Sub", [y, g.const(np.float32(1000.0), "down")], name="down_sub")
    y = g.conv(g.qdq(y, 0.02, name="mid"), 8, 8, name="c2")
    g.output(y)
    return g.save(path)


@pytest.mark.parametrize("rename", [False, True], ids=["names kept", "outputs renamed"])
def test_fp16_layers_round_in_both_models_as_an_fp16_build_runs_them(
    tmp_path: Path, rename: bool
) -> None:
    from qdqkit.core import numerics
    from qdqkit.core.model_io import load_model
    from qdqkit.core.shapes import fill_value_types
    from qdqkit.translation import TranslateOptions
    from qdqkit.verification.emulation import round_to_fp16

    source = _offset_chain(tmp_path / "m.onnx")
    translate(source, tmp_path / "out", TranslateOptions(rename_node_outputs=rename))
    result = verify(source, tmp_path / "out", split=True)
    # The translation changed nothing: same scales, weights on TensorRT's grid, FP16 where an
    # --int8 --fp16 build of the Q/DQ model runs FP16 too.
    assert result.fp16_tensors >= 2 and not result.fp16_unmatched
    assert result.passed and result.min_snr_db >= 80, result.verdict
    # The same rounding on one side only is far below the bar: it is not optimized away, and
    # a reference without it would fail a faithful translation.
    model = load_model(source)
    fill_value_types(model)
    assert round_to_fp16(model.graph, ["c1_out", "up_add_out"]) == 2
    feeds = {"x": np.random.default_rng(0).uniform(-2.5, 2.5, (1, 8, 8, 8)).astype(np.float32)}
    exact = numerics.make_session(load_model(source), optimize=True).run(None, feeds)[0]
    rounded = numerics.make_session(model, optimize=True).run(None, feeds)[0]
    snr = 10 * np.log10(np.sum(exact ** 2) / np.sum((exact - rounded) ** 2))
    assert snr < 20


def test_an_ir3_model_with_its_initializers_as_inputs_verifies(tmp_path: Path) -> None:
    # IR version 3 lists every initializer as a graph input too (Caffe2's exports, and
    # onnxruntime's quantizer keeps the version). The FP16 layers make verify rewrite the Q/DQ
    # model, which must stay a model onnxruntime loads.
    source = _offset_chain(tmp_path / "m.onnx")
    model = onnx.load(source)
    model.ir_version = 3
    # Caffe2's ResNet-50 also carries one nobody reads (a data-queue blob).
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(4, np.float32), "queue"))
    model.graph.input.extend(onnx.helper.make_tensor_value_info(
        init.name, init.data_type, list(init.dims)) for init in model.graph.initializer)
    onnx.save(model, source)
    translate(source, tmp_path / "out")
    result = verify(source, tmp_path / "out")
    assert result.fp16_tensors >= 2 and result.passed, result.verdict


def test_unary_scales_are_not_emulated_as_quantization(tmp_path: Path) -> None:
    from qdqkit.translation import TranslateOptions

    source = tmp_path / "m.onnx"
    onnx.save(demo_network("trt"), source)
    result = translate(source, tmp_path / "out", TranslateOptions(add_unary_ew_scales_for_dla=True))
    assert result.unary_scales, "the demo's conv2 outputs feed residual Adds with scaled skips"
    check = verify(source, tmp_path / "out")
    assert sorted(check.unary_tensors) == sorted(result.unary_scales)
    assert check.min_snr_db > 60


# ------------------------------------------------------------------ exact bundles stay exact
def _ort_style(path: Path, *, input_scale: float = 0.02, shape: list[int | str] | None = None,
               seed: int = 3) -> Path:
    """onnxruntime quantize_static's spelling: int8 weights behind a DQ only, per channel,
    symmetric activations; every float tensor has a scale, so nothing runs FP16."""
    g = GraphBuilder("ort", seed=seed)
    x = g.input("x", shape or [1, 3, 16, 16])
    y = g.conv(g.qdq(x, input_scale, name="x"), 3, 16, weight="dq-only", name="c1")
    y = g.node("Relu", [y], name="r1")
    y = g.conv(g.qdq(y, 0.05, name="r1"), 16, 16, weight="dq-only", name="c2")
    g.output(g.qdq(y, 0.05, name="c2"))
    return g.save(path)


def test_weights_already_on_the_grid_gain_no_ulp_noise() -> None:
    # Integer weights (max |q| = 127 per channel) times float32 scales, as a DQ computes them.
    rng = np.random.default_rng(0)
    scale = rng.uniform(1e-4, 1e-2, size=2048).astype(np.float32)
    q = rng.integers(-127, 128, size=(2048, 32)).astype(np.float32)
    q[:, 0] = 127
    on_grid = q * scale[:, None]
    naive = np.abs(on_grid).max(axis=1) / np.float32(127)
    moved = np.rint(on_grid / naive[:, None]) * naive[:, None] != on_grid
    assert moved.any(), "recomputing max|w|/127 in float32 must move some weights by an ulp"
    assert np.array_equal(fake_quantize_weight(on_grid, 0), on_grid)
    w = rng.normal(0, 0.05, size=(16, 64)).astype(np.float32)
    assert not np.array_equal(fake_quantize_weight(w, 0), w)  # float weights do move


def test_exact_translation_verifies_as_exact(tmp_path: Path) -> None:
    source = _ort_style(tmp_path / "ort.onnx")
    translate(source, tmp_path / "out")
    result = verify(source, tmp_path / "out", split=True)
    assert result.passed and result.min_snr_db == float("inf")
    assert [s.min_snr_db for s in result.loss_sources] == [float("inf")] * 2
    assert result.changed_weights == 0 and result.quantized_weights == 2
    assert result.verdict.startswith("PASS")


def test_an_if_body_reads_a_network_input_as_given(tmp_path: Path) -> None:
    # The engine takes a network input in float and its conv quantizes it on reading, while an
    # If body, whose layers carry no cached scale, reads it as given, as the Q/DQ model's body
    # does. Quantizing it there too would score a faithful bundle below the engine.
    g = GraphBuilder("inputs", seed=1)
    x = g.input("x", [1, 3, 8, 8])
    y = g.conv(g.qdq(x, 0.02, name="x"), 3, 8, weight="dq-only", name="c1")
    g.output(g.qdq(y, 0.05, name="c1"))
    g.output(g.branch_reading(x))
    source = g.save(tmp_path / "m.onnx")
    translate(source, tmp_path / "out")
    result = verify(source, tmp_path / "out", samples=2)
    assert result.passed
    assert [c.snr_db for c in result.outputs] == [float("inf")] * 2


# ------------------------------------------------------------------ verdict and exit code
def _cli(*argv: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from qdqkit.cli import main

    code = main(["verify", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_pass_and_fail_exit_codes(bundle: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    source, out = bundle
    code, text, _ = _cli(source, out, capsys=capsys)
    assert code == 0 and text.splitlines()[-1].startswith("PASS: min SNR")
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    cache_path = broken / "demo_precision_config_calib.cache"
    cache = read_calib_cache(cache_path)
    for name in cache.scales:
        cache.scales[name] *= 40  # every range 40x too wide
    cache_path.write_text(format_calib_cache(cache.scales, cache.version))
    code, text, _ = _cli(source, broken, "--min-snr", "40", capsys=capsys)
    last = text.splitlines()[-1]
    assert code == 1 and last.startswith("FAIL: output 'logits' SNR") and "< 40 dB" in last
    assert "where the loss comes from" in text  # a failure is split into its sources
    code, text, _ = _cli(source, broken, "--json", capsys=capsys)
    assert code == 1 and '"passed": false' in text


def _edited_cache(out: Path, tmp_path: Path, value: float) -> Path:
    broken = tmp_path / f"cache_{value}"
    shutil.copytree(out, broken)
    cache_path = next(broken.glob("*.cache"))
    lines = cache_path.read_text().splitlines()
    name = lines[1].rpartition(": ")[0]
    import struct
    lines[1] = f"{name}: {struct.pack('>f', value).hex()}"
    cache_path.write_text("\n".join(lines))
    return broken


@pytest.mark.parametrize("value", [float("nan"), -0.05, 0.0])
def test_bad_cache_scales_are_refused(bundle: tuple[Path, Path], tmp_path: Path,
                                      value: float) -> None:
    source, out = bundle
    with pytest.raises(QdqkitError, match="must be finite and positive"):
        verify(source, _edited_cache(out, tmp_path, value))


def test_zero_samples_and_empty_files_are_refused(bundle: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    source, out = bundle
    with pytest.raises(QdqkitError, match="at least 1"):
        verify(source, out, samples=0)
    np.save(tmp_path / "empty.npy", np.zeros((0, 3, 32, 32), np.float32))
    with pytest.raises(QdqkitError, match="no samples"):
        verify(source, out, tmp_path / "empty.npy")


def test_non_finite_inputs_are_refused(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    source, out = bundle
    data = np.zeros((2, 3, 32, 32), np.float32)
    data[1, 0, 0, 0] = np.nan
    np.save(tmp_path / "nan.npy", data)
    with pytest.raises(QdqkitError, match="NaN or infinite"):
        verify(source, out, tmp_path / "nan.npy")


def test_nan_outputs_fail(tmp_path: Path) -> None:
    g = GraphBuilder("nan")
    x = g.input("x", [1, 8])
    g.node("Log", [g.qdq(x, 0.01, name="x")], name="log", out="y")  # log of negatives: NaN
    g.output("y")
    source = g.save(tmp_path / "nan.onnx")
    translate(source, tmp_path / "out")
    result = verify(source, tmp_path / "out")
    assert not result.passed and "NaN or infinite" in result.verdict


def test_npy_inputs_and_pickles(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    source, out = bundle
    data = np.random.default_rng(1).uniform(-1, 1, size=(2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "in.npy", data)
    assert verify(source, out, tmp_path / "in.npy").samples == 2
    np.savez(tmp_path / "objects.npz", input=np.array([{"a": 1}], dtype=object))
    with pytest.raises(QdqkitError, match=r"pickle|object|not numbers"):
        verify(source, out, tmp_path / "objects.npz")


# ------------------------------------------------------------------ inputs that test something
def test_random_inputs_span_the_input_quantizer(tmp_path: Path) -> None:
    # At input scale 2.0, uniform [-1, 1] would quantize to all zeros and prove nothing: a cache
    # whose input scale is 1.5x off would then verify as exact.
    source = _ort_style(tmp_path / "wide.onnx", input_scale=2.0)
    translate(source, tmp_path / "out")
    assert verify(source, tmp_path / "out").min_snr_db == float("inf")
    cache_path = next((tmp_path / "out").glob("*.cache"))
    cache = read_calib_cache(cache_path)
    cache.scales["x"] = 3.0
    cache_path.write_text(format_calib_cache(cache.scales, cache.version))
    assert verify(source, tmp_path / "out").min_snr_db < 40


def test_dynamic_dimensions_use_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _ort_style(tmp_path / "dyn.onnx", shape=["N", 3, 16, "W"])
    translate(source, tmp_path / "out")
    assert verify(source, tmp_path / "out", samples=1).shapes == {"x": [1, 3, 16, 32]}
    code, text, _ = _cli(source, tmp_path / "out", "--shapes", "x:2x3x16x48", capsys=capsys)
    assert code == 0 and "shapes            x 2x3x16x48" in text
    code, _, err = _cli(source, tmp_path / "out", "--shapes", "x:1x3x16", capsys=capsys)
    assert code == 2 and "rank 3" in err


@pytest.mark.parametrize("shape", [[1, 8, 2**20, 2**20], [2**40, 3, 16, 16]])
def test_absurd_declared_inputs_are_refused(tmp_path: Path, shape: list[int]) -> None:
    g = GraphBuilder("huge")
    x = g.input("x", shape)
    g.node("Identity", [g.qdq(x, 0.05, name="x")], name="out", out="y")
    g.output("y")
    source = g.save(tmp_path / "huge.onnx")
    translate(source, tmp_path / "out")
    with pytest.raises(QdqkitError, match="GiB of random data"):
        verify(source, tmp_path / "out")


# ------------------------------------------------------------------ the bundle knows its source
def test_a_bundle_of_another_model_is_refused(tmp_path: Path) -> None:
    first = _ort_style(tmp_path / "a" / "m.onnx", seed=1) if (tmp_path / "a").mkdir() is None \
        else None
    second = _ort_style(tmp_path / "b" / "m.onnx", seed=2) if (tmp_path / "b").mkdir() is None \
        else None
    assert first is not None and second is not None
    translate(first, tmp_path / "out")
    with pytest.raises(QdqkitError, match="translated from another model"):
        verify(second, tmp_path / "out")
    # A bundle without the record (another translator's) is verified with a warning.
    model = onnx.load(tmp_path / "out" / "m_noqdq.onnx")
    del model.metadata_props[:]
    onnx.save(model, tmp_path / "out" / "m_noqdq.onnx")
    assert not verify(first, tmp_path / "out").source_recorded


def test_an_npz_declaring_128_gib_is_refused(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    import struct
    import zipfile

    source, out = bundle
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (8589934592, 1, 4), }"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    payload = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 64
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as archive:
        archive.writestr("input.npy", payload)
    with pytest.raises(QdqkitError, match=r"huge\.npz.*(bytes|GiB|truncated)"):
        verify(source, out, tmp_path / "huge.npz")


def test_the_two_models_never_run_at_once(
    bundle: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Peak memory is one model's only if each session is gone before the next is built.
    import weakref

    from qdqkit.core import numerics

    built: list[weakref.ref[object]] = []
    make_session = numerics.make_session

    def one_at_a_time(*args: object, **kwargs: object) -> object:
        alive = [ref for ref in built if ref() is not None]
        assert not alive, "a session was built while another was still alive"
        session = make_session(*args, **kwargs)  # type: ignore[arg-type]
        built.append(weakref.ref(session))
        return session

    monkeypatch.setattr(numerics, "make_session", one_at_a_time)
    source, out = bundle
    result = verify(source, out, samples=2, split=True)
    assert len(built) == 3 and result.passed  # the Q/DQ model, the emulation, one split step
    built.clear()
    result = verify(source, out, samples=2, split=False, layers=True)
    assert len(built) == 4 and result.passed  # and the two of the layer check, one at a time


def test_outputs_past_the_memory_budget_go_to_disk_and_come_back(
    bundle: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from qdqkit.verification import running

    source, out = bundle
    in_memory = verify(source, out, samples=3)
    store = running.OutputStore(["y"], memory_budget=100)
    arrays = [np.arange(n * 10, dtype=np.float32).reshape(1, -1) for n in (1, 2, 3)]
    for array in arrays:
        store.add({"y": array, "ignored": array})
    spilled = store._spill
    assert spilled is not None and len(list(Path(spilled.name).iterdir())) == 2  # 40 B kept
    assert all(np.array_equal(a["y"], b) for a, b in zip(store, arrays, strict=True))
    store.close()
    assert not Path(spilled.name).exists()

    monkeypatch.setattr(running, "MEMORY_BUDGET", 0)  # every batch spilled, same figures
    on_disk = verify(source, out, samples=3)
    assert [o.snr_db for o in on_disk.outputs] == [o.snr_db for o in in_memory.outputs]
    assert [o.max_abs for o in on_disk.outputs] == [o.max_abs for o in in_memory.outputs]


def test_fp16_rounding_names_do_not_collide_with_existing_casts() -> None:
    # A translated FP16 model may already hold a Cast named '<tensor>_to_fp16'.
    import onnx_ir as ir

    from qdqkit.core.numerics import make_session
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.verification.emulation import round_to_fp16

    g = GraphBuilder("casts", opset=13)
    x = g.input("x", [1, 4])
    t = g.node("Relu", [x], out="t")
    half = g.node("Cast", [t], name="t_to_fp16", out="t_half", to=10)
    g.node("Cast", [half], name="t_back", out="out", to=1)
    g.output("out", [1, 4])
    model = g.ir()
    relu = next(n for n in model.graph if n.op_type == "Relu")
    relu.outputs[0].dtype = ir.DataType.FLOAT
    assert round_to_fp16(model.graph, ["t"]) == 1
    names = [n.name for n in model.graph]
    assert len(names) == len(set(names))
    feeds = {"x": np.array([[1.0, 2.0, 3.0, 1e-3]], np.float32)}
    out = make_session(model).run(None, feeds)[0]
    np.testing.assert_array_equal(out, feeds["x"].astype(np.float16).astype(np.float32))


def test_weights_in_constant_nodes_are_requantized_as_initializers_are(tmp_path: Path) -> None:
    # paddle2onnx stores weights in Constant nodes; TensorRT's parser takes them as weights all
    # the same and requantizes them, so the emulation must too (here on TensorRT's own grid).
    g = GraphBuilder("constant_weight", seed=2)
    x = g.input("x", [1, 4, 8, 8])
    w = g.rng.normal(0, 0.2, (8, 4, 3, 3)).astype(np.float32)
    scales = (np.abs(w).reshape(8, -1).max(axis=1) / 127).astype(np.float32)
    wq = g.qdq(g.constant(w, "w"), scales, axis=0, name="w")
    y = g.node("Conv", [g.qdq(x, 0.02, name="x"), wq], name="conv", pads=[1, 1, 1, 1])
    g.output(g.qdq(y, 0.05, name="y"))
    source = g.save(tmp_path / "m.onnx")
    translate(source, tmp_path / "out")
    result = verify(source, tmp_path / "out", split=True)
    assert result.quantized_weights == 1 and result.changed_weights == 1
    assert result.min_snr_db == float("inf")
    assert result.loss_sources[0].min_snr_db < 60  # the float weight alone is not the model


def _deep_chain(path: Path, depth: int = 24, channels: int = 16) -> Path:
    """Conv -> BatchNormalization -> Relu blocks behind Q/DQ pairs at a coarse scale: the
    translation folds each BN into its conv, whose float rounding differs from conv-then-BN, so
    an element now and then lands one INT8 step off, and the next layers amplify such steps."""
    g = GraphBuilder("deep", seed=0)
    y = g.input("x", [1, channels, 16, 16])
    for i in range(depth):
        y = g.conv(g.qdq(y, 0.05, name=f"in{i}"), channels, channels, name=f"c{i}", std=0.2)
        y = g.node("Relu", [g.bn(y, channels, name=f"bn{i}", random=True)], name=f"r{i}")
    g.output(g.qdq(y, 0.05, name="out"))
    return g.save(path)


@pytest.fixture(scope="module")
def deep_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("deep")
    source = _deep_chain(folder / "deep.onnx")
    translate(source, folder / "out")
    return source, folder / "out"


def test_rounding_an_int8_network_amplifies_passes_layer_by_layer(
        deep_bundle: tuple[Path, Path]) -> None:
    source, out = deep_bundle
    result = verify(source, out, samples=16, split=False)
    assert result.min_snr_db < 40  # the outputs alone would fail this faithful translation
    layers = result.layers
    assert layers is not None and layers.samples == 16
    assert layers.compared > 24 and layers.exact > layers.compared // 2
    assert layers.min_snr_db > 60  # a stretch differs by a rounding step at most
    assert result.passed and not result.failures
    assert "amplify rounding" in result.verdict and result.verdict.startswith("PASS")


@pytest.mark.parametrize("factor", [1.01, 1.3])
def test_a_scale_off_by_a_little_fails_layer_by_layer_and_is_placed(
        deep_bundle: tuple[Path, Path], tmp_path: Path, factor: float) -> None:
    source, out = deep_bundle
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    cache_path = broken / "deep_precision_config_calib.cache"
    cache = read_calib_cache(cache_path)
    cache.scales["r9_out"] *= factor  # the input of block 10
    cache_path.write_text(format_calib_cache(cache.scales, cache.version))
    result = verify(source, broken, samples=4, split=False, layers=True)
    layers = result.layers
    assert layers is not None and layers.min_snr_db < 40
    # The stretch that reads the wrong quantization, conv 10 with its folded BN, is the worst.
    assert layers.worst == "bn10_out"
    assert not result.passed and "layer by layer, 'bn10_out'" in result.verdict


def test_layers_are_checked_only_when_asked_or_needed(bundle: tuple[Path, Path]) -> None:
    source, out = bundle
    assert verify(source, out, samples=2).layers is None  # the outputs pass: nothing to look at
    checked = verify(source, out, samples=2, layers=True).layers
    assert checked is not None and checked.min_snr_db > 60 and checked.samples == 2
