"""onnx-ir imports without executing sympy, and its symbolic dimensions still work.

Each case runs in a fresh interpreter: the deferral only acts on the first import of onnx-ir.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, *path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*(str(p) for p in path), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_sympy_runs_only_when_a_symbolic_dimension_is_computed() -> None:
    out = _run(
        "import sys, qdqkit, onnx_ir as ir\n"
        "from qdqkit.core.lazy_sympy import _DeferSympy\n"
        "print('sympy.core' in sys.modules)\n"
        "print(any(isinstance(f, _DeferSympy) for f in sys.meta_path))\n"
        "dim = ir.SymbolicDim('N') * 2 + 1\n"
        "print(dim.value, dim.evaluate({'N': 5}))\n"
        "print(ir.SymbolicDim('max(a, b)').evaluate({'a': 3, 'b': 7}))\n"
        "print('sympy.core' in sys.modules)\n"
    )
    assert out.splitlines() == ["False", "False", "2*N + 1 11", "7", "True"]


def test_onnx_ir_reads_and_writes_a_model_with_symbolic_dimensions() -> None:
    out = _run(
        "import sys, qdqkit, onnx, onnx_ir as ir\n"
        "from onnx import helper, TensorProto\n"
        "x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', 3])\n"
        "y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', 3])\n"
        "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g', [x], [y])\n"
        "model = ir.serde.deserialize_model(helper.make_model(g))\n"
        "dim = model.graph.inputs[0].shape[0]\n"
        "print(type(dim).__name__, dim.value, 'sympy.core' in sys.modules)\n"
        "proto = ir.serde.serialize_model(model)\n"
        "print(proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param)\n"
    )
    assert out.splitlines() == ["SymbolicDim batch False", "batch"]


def test_nothing_is_deferred_when_sympy_is_already_imported() -> None:
    out = _run(
        "import sys, sympy, qdqkit, onnx_ir as ir\n"
        "print(type(sys.modules['sympy']).__name__, len(sys.meta_path) == len(set(sys.meta_path)))\n"
        "from qdqkit.core.lazy_sympy import _DeferSympy\n"
        "print(any(isinstance(f, _DeferSympy) for f in sys.meta_path))\n"
        "print((ir.SymbolicDim('N') + 1).value)\n"
    )
    assert out.splitlines() == ["module True", "False", "N + 1"]


def test_another_onnx_ir_layout_gets_a_normal_import(tmp_path: Path) -> None:
    # A package named onnx_ir whose body uses sympy at once and has no _symbolic_shapes: sympy
    # loads at that first use, exactly as an eager import would have.
    package = tmp_path / "onnx_ir"
    package.mkdir()
    (package / "__init__.py").write_text("import sympy\nTHREE = sympy.Integer(3)\n")
    out = _run(
        "import sys, qdqkit, onnx_ir\n"
        "from qdqkit.core.lazy_sympy import _DeferSympy\n"
        "print(onnx_ir.THREE + 1, onnx_ir.__file__.endswith('onnx_ir/__init__.py'))\n"
        "print(type(onnx_ir.__loader__).__name__)\n"
        "print(any(isinstance(f, _DeferSympy) for f in sys.meta_path))\n",
        tmp_path,
    )
    assert out.splitlines() == ["4 True", "SourceFileLoader", "False"]
