"""The one way probescope opens image files: named formats only, a pixel limit checked before decoding, and 16-bit
pixels scaled, not clipped.

- Formats: Pillow picks a decoder by the file's content, so a PostScript file named `.png` would start Ghostscript.
  Only the formats in `IMAGE_FORMATS` are tried; anything else is refused, naming the file.
- Pixel limit: a 12000x12000 PNG needs gigabytes and a minute to decode. Images with more than `max_pixels()`
  pixels (default 50 million; the environment variable PROBESCOPE_MAX_PIXELS, `set_max_pixels`, or
  `probescope score --max-pixels`) are refused from their header, before anything is decoded. Pillow's own
  decompression-bomb check follows the same limit.
- Bit depth: 16-bit greyscale (mode I;16*) is scaled to 8 bits as round(v * 255 / 65535), where Pillow's RGB
  conversion would clip everything above 255 to white; Pillow reads 16-bit colour by keeping each channel's high
  byte (floor(v / 256), at most one level from exact scaling). 32-bit integer and float images have no standard
  8-bit scaling and are refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from probescope.core.environment import MAX_PIXELS, max_pixels_text
from probescope.core.errors import InputError
from probescope.core.files import readable_file, stat_problem

IMAGE_FORMATS = ("PNG", "JPEG", "BMP", "WEBP", "TIFF")
LABEL_FORMATS = ("PNG",)  # Broden label maps: lossless, exact 8-bit values
DEFAULT_MAX_PIXELS = 50_000_000
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")

# probescope refuses oversized images itself, with a message naming the file: Pillow's warning would only repeat it
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


def _limit_from_environment() -> int:
    text = max_pixels_text().replace("_", "")
    if not text:
        return DEFAULT_MAX_PIXELS
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"{MAX_PIXELS} must be a positive whole number of pixels, got {text!r}")
    return int(text)


_max_pixels = [0]  # 0: not read from the environment yet


def max_pixels() -> int:
    """The largest image (width x height) that is decoded."""
    if not _max_pixels[0]:
        set_max_pixels(_limit_from_environment())
    return _max_pixels[0]


def set_max_pixels(limit: int) -> None:
    """Change the pixel limit for this process (Pillow's own check follows it)."""
    if limit < 1:
        raise InputError(f"the pixel limit must be at least 1, got {limit}")
    _max_pixels[0] = limit
    Image.MAX_IMAGE_PIXELS = limit


def _names(formats: tuple[str, ...]) -> str:
    shown = [f.replace("WEBP", "WebP") for f in formats]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


@contextmanager
def open_image(path: str | Path, formats: tuple[str, ...] = IMAGE_FORMATS,
               what: str = "image") -> Iterator[Image.Image]:
    """The Pillow image of `path`, opened with `formats` only and within the pixel limit (not decoded yet); errors
    call it `what` ('label image')."""
    path = readable_file(path, f"{what} file not found")  # a FIFO would block Image.open; a bad link is named
    limit = max_pixels()
    try:
        image = Image.open(path, formats=list(formats))
    except UnidentifiedImageError:
        raise InputError(f"{what} does not decode: not a {_names(formats)} file (other formats are not opened)",
                         path) from None
    except Image.DecompressionBombError:
        raise InputError(f"{what} is over the limit of {limit:,} pixels (raise it with {MAX_PIXELS} or "
                         "--max-pixels)", path) from None
    except (OSError, ValueError, SyntaxError) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:  # the file changed since it was checked
            raise InputError(stat_problem(exc, path), path) from None
        raise InputError(f"{what} does not decode ({type(exc).__name__}: {exc})", path) from None
    with image:
        width, height = image.size
        if width * height > limit:
            raise InputError(f"{what} is {width}x{height} = {width * height:,} pixels, over the limit of {limit:,} "
                             f"(raise it with {MAX_PIXELS} or --max-pixels)", path)
        yield image


def read_rgb(path: str | Path, formats: tuple[str, ...] = IMAGE_FORMATS, *, exact: bool = False,
             what: str = "image") -> np.ndarray:
    """The image as a writable uint8 RGB array (H, W, 3). `exact` (label maps) refuses anything but 8-bit pixels, whose
    values must come through unchanged."""
    path = Path(path)
    with open_image(path, formats, what) as image:
        try:
            return _to_rgb(image, path, exact, what)
        except (OSError, ValueError, SyntaxError) as exc:  # a truncated or corrupt file shows when it is decoded
            raise InputError(f"{what} does not decode ({type(exc).__name__}: {exc})", path) from None


def _to_rgb(image: Image.Image, path: Path, exact: bool, what: str) -> np.ndarray:
    if image.mode in _SIXTEEN_BIT:
        if exact:
            raise InputError(f"{what} has 16-bit pixels; it must hold exact 8-bit values", path)
        grey = np.asarray(image).astype(np.uint32)
        scaled = ((grey * 255 + 32767) // 65535).astype(np.uint8)  # round(v * 255 / 65535), halves up
        return np.repeat(scaled[..., None], 3, axis=2)
    if image.mode in ("I", "F"):
        kind = "32-bit float" if image.mode == "F" else "32-bit integer"
        raise InputError(f"{what} has {kind} pixels: no standard scaling to 8-bit colour (save it with 8 or 16 bits)",
                         path)
    return np.array(image.convert("RGB"), dtype=np.uint8)
