"""The shapes world: captions, the training/held-out split, the renderer, and the pixel statistics that
read a picture back (colour of the shape, colour of the background, position).

Pictures are 64x64: one shape (circle, square, triangle, star) of one colour on a plain background of
another colour, at one of nine places ("top left" ... "bottom right"; no position phrase means centred).
"""
import json
import math
import random

import torch

SIZE = 64

# Plain, saturated colours, far enough apart in RGB for a nearest-colour reading.
COLOURS = {
    "red": (230, 20, 20),
    "green": (20, 200, 40),
    "blue": (30, 60, 235),
    "yellow": (250, 225, 20),
    "white": (250, 250, 250),
    "black": (10, 10, 10),
    "purple": (140, 30, 200),
    "orange": (250, 130, 10),
}
COLOUR_NAMES = list(COLOURS)
SHAPES = ["circle", "square", "triangle", "star"]
# Position phrase -> centre of the shape as a fraction of the picture; "" (no phrase) is the centre.
POSITIONS = {
    "": (0.5, 0.5), "top left": (0.25, 0.25), "top": (0.5, 0.25), "top right": (0.75, 0.25),
    "left": (0.25, 0.5), "right": (0.75, 0.5),
    "bottom left": (0.25, 0.75), "bottom": (0.5, 0.75), "bottom right": (0.75, 0.75),
}
POSITION_NAMES = list(POSITIONS)


def caption(fg: str, bg: str, shape: str, position: str) -> str:
    def article(word: str) -> str:
        return "an" if word[0] in "aeiou" else "a"

    text = f"{article(fg)} {fg} {shape} on {article(bg)} {bg} background"
    return f"{text}, {position}" if position else text


def all_triples() -> list:
    return [(fg, bg, s) for fg in COLOUR_NAMES for bg in COLOUR_NAMES if fg != bg for s in SHAPES]


def held_out_triples(seed: int, count: int = 16) -> list:
    """(shape colour, background colour, shape) combinations never shown in training, at any position.
    Chosen so that no colour pair and no (colour, shape) pair is held out twice: each held-out triple is
    a new combination of parts that training shows in other company."""
    rng = random.Random(seed)
    triples = all_triples()
    rng.shuffle(triples)
    chosen, pairs = [], set()
    for fg, bg, s in triples:
        keys = {("pair", fg, bg), ("fg", fg, s), ("bg", bg, s)}
        if keys & pairs:
            continue
        chosen.append((fg, bg, s))
        pairs |= keys
        if len(chosen) == count:
            break
    return sorted(chosen)


def caption_index(fg: int, bg: int, shape: int, position: int) -> int:
    return ((fg * len(COLOURS) + bg) * len(SHAPES) + shape) * len(POSITIONS) + position


def all_captions() -> list:
    """Every caption, at caption_index (colour pairs with fg == bg included, never drawn)."""
    out = []
    for fg in COLOUR_NAMES:
        for bg in COLOUR_NAMES:
            for s in SHAPES:
                for p in POSITION_NAMES:
                    out.append(caption(fg, bg, s, p))
    return out


def render(fg, bg, shape, cx, cy, radius, supersample: int = 4) -> torch.Tensor:
    """Pictures [N, 3, SIZE, SIZE] in [-1, 1]. fg, bg, shape: int64 [N] indices; cx, cy, radius: float [N]
    in pixels. Rendered at `supersample` times the size and averaged, so edges are anti-aliased."""
    device = cx.device
    n, big = cx.shape[0], SIZE * supersample
    coords = (torch.arange(big, device=device, dtype=torch.float32) + 0.5) / supersample
    dx = coords.view(1, 1, big) - cx.view(n, 1, 1)
    dy = coords.view(1, big, 1) - cy.view(n, 1, 1)
    r = radius.view(n, 1, 1)
    circle = dx * dx + dy * dy <= r * r
    square = torch.maximum(dx.abs(), dy.abs()) <= 0.85 * r
    tri_r = 1.2 * r  # circumradius of an upright equilateral triangle centred on (cx, cy)
    triangle = (dy <= tri_r / 2) & (dx.abs() <= (dy + tri_r) / math.sqrt(3))
    # Five-pointed star, a point upwards: fold the angle into one point's half-sector and test against the
    # edge from the outer point to the inner vertex.
    outer = 1.3 * r
    inner = 0.5 * outer
    theta = torch.atan2(dx, -dy)
    sector = 2 * math.pi / 5
    alpha = (torch.remainder(theta, sector) - sector / 2).abs()
    alpha = sector / 2 - alpha  # 0 along a point, 36 degrees along an inner vertex
    rho = torch.sqrt(dx * dx + dy * dy)
    qx, qy = rho * torch.cos(alpha), rho * torch.sin(alpha)
    ex, ey = inner * math.cos(sector / 2) - outer, inner * math.sin(sector / 2)
    star = ex * qy - ey * (qx - outer) >= 0  # on the centre's side of that edge (the centre gives ey * outer > 0)
    masks = torch.stack([circle, square, triangle, star], dim=1)  # [N, 4, big, big]
    mask = masks.gather(1, shape.view(n, 1, 1, 1).expand(n, 1, big, big)).float()
    palette = torch.tensor(list(COLOURS.values()), device=device, dtype=torch.float32) / 255.0
    fg_rgb = palette[fg].view(n, 3, 1, 1)
    bg_rgb = palette[bg].view(n, 3, 1, 1)
    image = mask * fg_rgb + (1 - mask) * bg_rgb
    image = torch.nn.functional.avg_pool2d(image, supersample)
    return image * 2 - 1


def position_centre(position: int, jitter_x, jitter_y):
    fx = torch.tensor([POSITIONS[p][0] for p in POSITION_NAMES], device=jitter_x.device)[position]
    fy = torch.tensor([POSITIONS[p][1] for p in POSITION_NAMES], device=jitter_x.device)[position]
    return fx * SIZE + jitter_x, fy * SIZE + jitter_y


def nearest_colour(rgb) -> str:
    return min(COLOURS, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb)))


def read_picture(pixels) -> dict:
    """Reads a picture back with simple pixel statistics (the C++ test does the same): the background is
    the median colour of the 3-pixel border; the shape is every pixel far from it; its colour is their
    median; its position is the third of the picture (in x and in y) that holds their centroid.
    pixels: uint8 or float 0..255, [H, W, 3]."""
    import numpy as np

    img = np.asarray(pixels, dtype=np.float32)
    h, w, _ = img.shape
    border = np.concatenate([img[:3].reshape(-1, 3), img[-3:].reshape(-1, 3),
                             img[:, :3].reshape(-1, 3), img[:, -3:].reshape(-1, 3)])
    bg = np.median(border, axis=0)
    far = np.abs(img - bg).max(axis=2) > 80
    result = {"background": nearest_colour(bg), "shape_pixels": int(far.sum())}
    if far.sum() < 30:
        result.update(colour=None, position=None)
        return result
    result["colour"] = nearest_colour(np.median(img[far], axis=0))
    ys, xs = np.nonzero(far)
    col = min(2, int((xs.mean() + 0.5) * 3 / w))  # + 0.5: pixel centres
    row = min(2, int((ys.mean() + 0.5) * 3 / h))
    names = {(0, 0): "top left", (1, 0): "top", (2, 0): "top right", (0, 1): "left", (1, 1): "",
             (2, 1): "right", (0, 2): "bottom left", (1, 2): "bottom", (2, 2): "bottom right"}
    result["position"] = names[(col, row)]
    return result
