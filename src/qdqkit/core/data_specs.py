"""The command-line spellings of image preprocessing and input shapes.

``parse_preprocess("size=224x224,mean=0.485/0.456/0.406,std=0.229/0.224/0.225,order=BGR,
layout=NHWC,scale=1/255")`` gives a :class:`~qdqkit.core.images.Preprocess`; every key is
optional; a bad spec is a one-line error naming the part that is wrong. Input shapes have their
own reader, ``qdqkit.core.shape_spec``.
"""

from __future__ import annotations

from qdqkit.core.errors import QdqkitError
from qdqkit.core.images import Preprocess

_KEYS = ("size", "mean", "std", "order", "layout", "scale")


def _number(text: str, where: str) -> float:
    try:
        if "/" in text:
            num, den = text.split("/", 1)
            return float(num) / float(den)
        return float(text)
    except (ValueError, ZeroDivisionError):
        raise QdqkitError(f"{where}: '{text}' is not a number") from None


def parse_preprocess(spec: str) -> Preprocess:
    values: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        where = f"--preprocess '{part}'"
        if not sep or key not in _KEYS:
            raise QdqkitError(f"{where}: use key=value with keys {', '.join(_KEYS)}")
        if key == "size":
            dims = value.lower().split("x")
            if len(dims) != 2 or not all(d.isdigit() and int(d) > 0 for d in dims):
                raise QdqkitError(f"{where}: size is HEIGHTxWIDTH, e.g. 224x224")
            values["size"] = (int(dims[0]), int(dims[1]))
        elif key in ("mean", "std"):
            values[key] = tuple(_number(v, where) for v in value.split("/"))
        elif key == "scale":
            values["scale"] = _number(value, where)
        elif key == "order":
            values["channel_order"] = value.upper()
        else:
            values["layout"] = value.upper()
    return Preprocess(**values)  # type: ignore[arg-type]
