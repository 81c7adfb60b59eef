"""The Image view's picture: the image with each firing unit's region tinted in its concept's colour, a small
numbered badge on the largest regions and, beside the picture, a legend of those numbers with the explanations
written out whole (image_panel.py holds the rest of the view).

Why numbers and a legend (issue 45): names written over a picture a few hundred pixels wide covered its middle and
were elided into unreadability, and a click on a name fell through to whatever pixel lay under it. A badge or a
legend entry is a target of its own: a click on one selects its concept (`concept_clicked`), a click elsewhere on
the picture picks that pixel (`clicked`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QMouseEvent, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

MAX_BADGES = 10  # numbered regions at most (badge and legend entry): the picture stays visible
SPOTS = 48  # places tried per badge, nearest the region's centre first
LEGEND_MIN, LEGEND_MAX, GAP = 140, 320, 8  # the legend's width (px) and its gap to the picture
TOP_LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop


@dataclass(frozen=True)
class Region:
    """A concept drawn in the picture: its number (badge, legend and table row) and where its badge goes."""

    concept: int  # index into the segmentation's concepts
    number: int
    label: str
    y: int  # a pixel drawn as the concept (picture pixels)
    x: int
    color: tuple[int, int, int]


@dataclass
class Layout:
    """Where everything goes at the canvas's size (widget coordinates)."""

    frame: QRectF  # the picture
    badges: dict[int, QRectF] = field(default_factory=dict)  # concept -> its badge on the picture
    legend: list[tuple[Region, QRectF, QRectF]] = field(default_factory=list)  # (region, swatch, its text)
    more: tuple[QRectF, str] | None = None  # the line saying how many regions the legend leaves to the table


def wrapped(text: str, metrics: QFontMetrics, width: float) -> str:
    """`text` broken onto lines at its spaces only (Qt would also break after a hyphen, splitting "grey-c"),
    each line as long as `width` allows; a word wider than that keeps a line of its own."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and metrics.horizontalAdvance(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def pixel_text(y: int, x: int) -> str:
    """A pixel with its axes named (x across, y down), never a bare pair whose order the reader must guess."""
    return f"x {x}, y {y}"


def grid_text(shape: tuple[int, int], photo: tuple[int, ...]) -> str:
    """Which pixel grid the coordinates count in: the segmentation's, which may be smaller than the image."""
    (sh, sw), (ih, iw) = shape, photo[:2]
    if (sh, sw) == (ih, iw):
        return f"pixels of the {sw}×{sh} image, x across and y down from its top left"
    return (f"pixels of the {sw}×{sh} segmentation grid, x across and y down from its top left; the image itself "
            f"is {iw}×{ih}")


def _ink(color: tuple[int, int, int]) -> QColor:
    return QColor(0, 0, 0) if sum(color) > 380 else QColor(255, 255, 255)


class RegionCanvas(QWidget):
    """The picture scaled to fit (nearest: the segmentation's pixels stay visible) with its regions' numbers and a
    legend (see the module docstring); `clicked(y, x)` in the picture's pixels, `concept_clicked(concept)`."""

    clicked = Signal(int, int)
    concept_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.image: QImage | None = None
        self.regions: list[Region] = []  # most pixels drawn first
        self.segmentation: np.ndarray | None = None  # (h, w) concept per picture pixel, -1 where none
        self.marked: tuple[int, int] | None = None
        self.selected: int | None = None  # the concept shown alone (the others dimmed)
        self._dim: QImage | None = None
        self._spots: dict[int, np.ndarray] = {}  # concept -> (k, 2) its pixels (y, x), nearest its anchor first
        self.setMinimumSize(200, 200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setCursor(Qt.CursorShape.CrossCursor)
        self.setMouseTracking(True)  # (tooltips name the region under the pointer)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(520, 320)

    def show_picture(self, image: QImage | None, regions: list[Region],
                     segmentation: np.ndarray | None = None) -> None:
        self.image, self.regions, self.segmentation = image, list(regions), segmentation
        self.marked, self.selected, self._dim = None, None, None
        self._spots = {}
        for r in self.regions[:MAX_BADGES]:
            spots = np.array([[r.y, r.x]]) if segmentation is None else np.argwhere(segmentation == r.concept)
            order = np.argsort(((spots - [r.y, r.x]) ** 2).sum(axis=1), kind="stable")
            self._spots[r.concept] = spots[order[::max(1, len(order) // SPOTS)]]
        self.update()

    def select(self, concept: int | None) -> None:
        """Show `concept`'s region alone, the rest dimmed (None: all alike)."""
        self.selected, self.marked = concept, None
        self._dim = None
        if concept is not None and self.segmentation is not None:
            rgba = np.zeros((*self.segmentation.shape, 4), np.uint8)
            rgba[..., 3] = np.where(self.segmentation == concept, 0, 170)
            h, w = self.segmentation.shape
            self._dim = QImage(rgba.data, w, h, 4 * w, QImage.Format.Format_RGBA8888).copy()
        self.update()

    # -- where things go ----------------------------------------------------------------------------------------------
    def placement(self) -> Layout:
        """The picture as large as fits beside a legend at least LEGEND_MIN wide (no legend when that would shrink
        it below half its size), the legend entries that fit (MAX_BADGES at most) and their badges on the picture
        (without a legend, MAX_BADGES of them)."""
        iw, ih = self.image.width(), self.image.height()
        w, h = self.width(), self.height()
        full = min(w / iw, h / ih)
        beside = min(h / ih, (w - GAP - LEGEND_MIN) / iw)
        legend = bool(self.regions) and beside >= full / 2
        s = beside if legend else full
        legend_w = min(LEGEND_MAX, w - s * iw - GAP) if legend else 0.0
        left = (w - s * iw - (GAP + legend_w if legend else 0)) / 2
        out = Layout(QRectF(left, (h - s * ih) / 2, s * iw, s * ih))
        metrics = QFontMetrics(self.font())
        if legend:
            self._legend(out, metrics, out.frame.right() + GAP, legend_w)
        self._badges(out, metrics, s, [r for r, _, _ in out.legend] if legend else self.regions[:MAX_BADGES])
        return out

    def _badges(self, out: Layout, metrics: QFontMetrics, s: float, regions: list[Region]) -> None:
        """A numbered disc on each region (largest first): on the drawn pixel nearest its centre where it covers no
        other disc, inside the picture; a region with no such place goes without."""
        d = metrics.height() + 2
        frame = out.frame
        if d > min(frame.width(), frame.height()) / 3:
            return
        for region in regions:
            for y, x in self._spots.get(region.concept, ()):
                box = QRectF(0, 0, d, d)
                box.moveCenter(QPointF(frame.left() + (x + 0.5) * s, frame.top() + (y + 0.5) * s))
                box.moveLeft(min(max(box.left(), frame.left()), frame.right() - d))
                box.moveTop(min(max(box.top(), frame.top()), frame.bottom() - d))
                if not any(box.adjusted(-1, -1, 1, 1).intersects(other) for other in out.badges.values()):
                    out.badges[region.concept] = box
                    break

    def _legend(self, out: Layout, metrics: QFontMetrics, x: float, width: float) -> None:
        """One entry a region, its whole explanation wrapped onto lines (never elided), as many as fit the height;
        a last line says how many more the table lists."""
        d = metrics.height() + 2
        text_w = int(width - d - 6)
        y, bottom = max(2.0, out.frame.top()), self.height() - 2.0
        last = min(len(self.regions), MAX_BADGES) - 1
        more_h = metrics.boundingRect(QRect(0, 0, int(width), 10_000), TOP_LEFT, wrapped(
            f"+ {len(self.regions)} more in the table below", metrics, width)).height()
        for k, region in enumerate(self.regions[:last + 1]):
            text_h = metrics.boundingRect(QRect(0, 0, text_w, 10_000), TOP_LEFT,
                                          wrapped(region.label, metrics, text_w)).height()
            need = max(d, text_h) + (0 if k == last == len(self.regions) - 1 else 4 + more_h)
            if y + need > bottom:
                break
            out.legend.append((region, QRectF(x, y, d, d), QRectF(x + d + 6, y, text_w, text_h)))
            y += max(d, text_h) + 4
        left = len(self.regions) - len(out.legend)
        if left:
            out.more = (QRectF(x, y, width, more_h), wrapped(f"+ {left} more in the table below", metrics, width))

    # -- drawing ------------------------------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:  # noqa: N802
        if self.image is None:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        lay = self.placement()
        p.drawImage(lay.frame, self.image)
        if self._dim is not None:
            p.drawImage(lay.frame, self._dim)
        small = QFont(self.font())
        small.setBold(True)
        small.setPointSizeF(self.font().pointSizeF() * 0.85)
        regions = {r.concept: r for r in self.regions}
        for concept, box in lay.badges.items():
            self._disc(p, box, regions[concept], small)
        text = self.palette().color(QPalette.ColorRole.WindowText)
        for region, swatch, where in lay.legend:
            if region.concept == self.selected:
                p.fillRect(QRectF(swatch.topLeft(), where.bottomRight()).adjusted(-3, -2, 3, 2),
                           self.palette().color(QPalette.ColorRole.Highlight))
                p.setPen(self.palette().color(QPalette.ColorRole.HighlightedText))
            else:
                p.setPen(text)
            p.setFont(self.font())
            p.drawText(where, int(TOP_LEFT), wrapped(region.label, QFontMetrics(self.font()), where.width()))
            self._disc(p, swatch, region, small)
        if lay.more is not None:
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.setFont(self.font())
            p.drawText(lay.more[0], int(TOP_LEFT), lay.more[1])
        if self.marked is not None:
            centre = self._centre(lay, *self.marked)
            p.setPen(QPen(QColor(255, 255, 0), 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawEllipse(centre, 5, 5)
        p.end()

    @staticmethod
    def _disc(p: QPainter, box: QRectF, region: Region, font: QFont) -> None:
        """A region's number on a disc of its colour, ringed in the opposite ink so it shows on any background."""
        p.setPen(QPen(_ink(region.color), 1))
        p.setBrush(QColor(*region.color))
        p.drawEllipse(box.adjusted(0.5, 0.5, -0.5, -0.5))
        p.setFont(font)
        p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), str(region.number))

    # -- where a point is ---------------------------------------------------------------------------------------------
    def concept_at(self, point: QPointF, lay: Layout | None = None) -> int | None:
        """The concept whose badge or legend entry is at `point` (widget coordinates), if any."""
        if self.image is None:
            return None
        lay = lay or self.placement()
        for concept, box in lay.badges.items():
            if box.contains(point):
                return concept
        for region, swatch, where in lay.legend:
            if QRectF(swatch.topLeft(), where.bottomRight()).adjusted(-3, -2, 3, 2).contains(point):
                return region.concept
        return None

    def pixel_at(self, point: QPointF, lay: Layout | None = None) -> tuple[int, int] | None:
        """The picture pixel (y, x) under `point`, if any."""
        if self.image is None:
            return None
        frame = (lay or self.placement()).frame
        s = frame.width() / self.image.width()
        y, x = int((point.y() - frame.top()) / s), int((point.x() - frame.left()) / s)
        inside = frame.contains(point) and 0 <= y < self.image.height() and 0 <= x < self.image.width()
        return (y, x) if inside else None

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if self.image is None or event.button() != Qt.MouseButton.LeftButton:
            return
        lay = self.placement()
        concept = self.concept_at(event.position(), lay)
        if concept is not None:
            self.select(concept)
            self.concept_clicked.emit(concept)
            return
        pixel = self.pixel_at(event.position(), lay)
        if pixel is not None:
            self.select(None)
            self.marked = pixel
            self.clicked.emit(*pixel)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        QToolTip.showText(event.globalPosition().toPoint(), self.tip_at(event.position()), self)

    def tip_at(self, point: QPointF) -> str:
        """What the pointer is over: a region's explanation (a badge, a legend entry or a pixel), and the pixel."""
        lay = self.placement() if self.image is not None else None
        names = {r.concept: r.label for r in self.regions}
        concept = self.concept_at(point, lay)
        if concept is not None:
            return f"{names[concept]}: click for its units"
        pixel = self.pixel_at(point, lay)
        if pixel is None:
            return ""
        c = -1 if self.segmentation is None else int(self.segmentation[pixel])
        return f"{pixel_text(*pixel)}: {names.get(c, 'no unit drawn')}"

    def _centre(self, lay: Layout, y: int, x: int) -> QPointF:
        s = lay.frame.width() / self.image.width()
        return QPointF(lay.frame.left() + (x + 0.5) * s, lay.frame.top() + (y + 0.5) * s)

    def point_of(self, y: int, x: int) -> QPoint:
        """The widget point at the centre of picture pixel (y, x) (for tests and scripted clicks)."""
        return self._centre(self.placement(), y, x).toPoint()

    def point_of_concept(self, concept: int) -> QPoint | None:
        """The centre of `concept`'s badge, else of its legend entry (None when neither is shown)."""
        lay = self.placement()
        if concept in lay.badges:
            return lay.badges[concept].center().toPoint()
        return next((swatch.center().toPoint() for region, swatch, _ in lay.legend if region.concept == concept), None)
