"""A workspace's panels as docks: resizable, hideable, movable, tabbed or floating, their arrangement saved between
runs and restorable from the View menu.

Each workspace lays its panels into a `PanelArea` (a QMainWindow used as a widget, so every workspace has docks of
its own): a central view and named panels around it. The default arrangement is set by proportions of the area's
size when it is first shown, so a narrow panel is the user's choice, never a clip of a fixed layout.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMainWindow, QScrollArea, QTabBar, QTabWidget, QWidget

MIN_PANEL = (120, 80)  # explicit: a panel may be made narrower than its layout's wish (small windows), never hidden
LEAST_SHARE = 0.5  # a panel keeps at least this part of its default share, or the default shares are applied
AREAS = {"left": Qt.DockWidgetArea.LeftDockWidgetArea, "right": Qt.DockWidgetArea.RightDockWidgetArea,
         "top": Qt.DockWidgetArea.TopDockWidgetArea, "bottom": Qt.DockWidgetArea.BottomDockWidgetArea}


class FittingScroll(QScrollArea):
    """Gives its widget the viewport's size, and scrolls only the part that does not fit at the widget's minimum.
    A resizable QScrollArea lays a widget with wrapped text out at its preferred height for the width, so a panel
    of plots and captions scrolled (its plots at full height, the last ones out of view) while it all fitted.

    The widget's layout changes whenever one of its labels gets new text (live numbers, many times a second while
    samples stream), so a fit is done once per turn of the event loop however many changes asked for it, and not at
    all while the panel is out of sight (under another tab, in a workspace not shown): it is fitted when shown. Each
    fit lays out every label of the panel at the width; measured at 50,000 gallery samples, fits ran 80 times a
    second, for 13% of the GUI thread's time."""

    def __init__(self, widget: QWidget, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWidget(widget)  # (not "resizable": sized here)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        widget.installEventFilter(self)
        self._fit_due = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest and not self._fit_due \
                and self.isVisible():
            self._fit_due = True
            QTimer.singleShot(0, self.fit)  # (after the widget's layout has taken the change in)
        return super().eventFilter(watched, event)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.fit()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self.fit()  # (changes made while it was out of sight)

    def fit(self) -> None:
        self._fit_due = False
        widget = self.widget()
        if widget is None:
            return
        for _ in range(2):  # a scroll bar that appears narrows the viewport: fit once more
            room = self.viewport().size()
            width = max(room.width(), widget.minimumSizeHint().width())
            layout = widget.layout()
            least = layout.minimumHeightForWidth(width) if layout is not None and layout.hasHeightForWidth() \
                else widget.minimumSizeHint().height()
            widget.resize(width, max(room.height(), least))
            if self.viewport().size() == room:
                break


def scrolled(widget: QWidget) -> QScrollArea:
    """`widget` in a frameless scroll area that gives it the area's size (it scrolls only what does not fit)."""
    return FittingScroll(widget)


class PanelArea(QMainWindow):
    """`add(key, title, widget, side)` puts a panel beside the central view; `tab(key, onto)` stacks it as a tab;
    `proportions` ({(key, orientation): share of the area's width or height}) shape the default arrangement: a
    panel may have both, e.g. a right-hand column's width and its top panel's height."""

    def __init__(self, prefix: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowFlags(Qt.WindowType.Widget)
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowNestedDocks
                            | QMainWindow.DockOption.AllowTabbedDocks | QMainWindow.DockOption.GroupedDragging)
        self.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas, QTabWidget.TabPosition.North)
        self.prefix = prefix
        self.panels: dict[str, QDockWidget] = {}
        self._on_screen: dict[str, bool] = {}  # a stacked panel's widget is "visible" to Qt under its tab
        self.proportions: dict[tuple[str, Qt.Orientation], float] = {}
        self.default_state: QByteArray | None = None
        self._saved: QByteArray | None = None
        self._arranging = False

    def add(self, key: str, title: str, widget: QWidget, side: str, share: float = 0.0,
            orientation: Qt.Orientation = Qt.Orientation.Horizontal) -> QDockWidget:
        """A panel at `side` ('left', 'right', 'top', 'bottom'); `share` of the area's width (or height, for
        a vertical `orientation`) in the default arrangement (0: what it asks for)."""
        dock = QDockWidget(title, self)
        dock.setObjectName(f"{self.prefix}/{key}")  # what saveState/restoreState know the panel by
        widget.setMinimumSize(*MIN_PANEL)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(AREAS[side], dock)
        self.panels[key] = dock
        self._on_screen[key] = False
        dock.visibilityChanged.connect(lambda shown, k=key: self._on_screen.__setitem__(k, shown))
        if share:
            self.proportions[(key, orientation)] = share
        return dock

    def set_central(self, widget: QWidget) -> None:
        widget.setMinimumSize(*MIN_PANEL)
        self.setCentralWidget(widget)

    def tab(self, key: str, onto: str) -> None:
        """Stack panel `key` as a tab on panel `onto`."""
        self.tabifyDockWidget(self.panels[onto], self.panels[key])

    def split(self, first: str, second: str, orientation: Qt.Orientation) -> None:
        """Put panel `second` beside (Horizontal) or under (Vertical) panel `first`."""
        self.splitDockWidget(self.panels[first], self.panels[second], orientation)

    def raise_panel(self, key: str) -> None:
        """Show panel `key` (its tab brought to the front, shown again if it was closed)."""
        dock = self.panels[key]
        dock.show()
        dock.raise_()

    def on_screen(self, key: str) -> bool:
        """Panel `key` is on screen: shown, and its tab in front when stacked."""
        return self._on_screen[key]

    def toggles(self) -> list[QAction]:
        """One checkable action per panel, for the View menu."""
        return [dock.toggleViewAction() for dock in self.panels.values()]

    # -- the arrangement ------------------------------------------------------------------------------------------
    def showEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().showEvent(event)
        if self.default_state is None and not self._arranging:
            # The area is shown before its window's layout gives it its size (it may be far larger then, and docks
            # keep their widths when it shrinks, squeezing the central view): arrange once that size is in.
            self._arranging = True
            QTimer.singleShot(0, self._first_arrangement)

    def _first_arrangement(self) -> None:
        self._arranging = False
        if self.default_state is not None:
            return
        self._apply_proportions()
        self.default_state = self.saveState()
        if self._saved is not None:
            self.restoreState(self._saved)
            QTimer.singleShot(0, self.fit)  # (once the restored sizes are laid out)

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().resizeEvent(event)
        if self.default_state is not None:
            QTimer.singleShot(0, self.fit)

    def fit(self) -> None:
        """Panels keep their pixel sizes when the area shrinks or an arrangement made in a larger window is
        restored, and a smaller window cannot give them all (the beam trace came back 10 px wide): where a panel
        with a default share, or the central view, got less than half of its share, the default shares are applied
        again (the arrangement itself, which panel is where, is kept)."""
        shares = [(self.panels[key], orientation, share) for (key, orientation), share in self.proportions.items()
                  if not self.panels[key].isFloating() and self.panels[key].isVisible()]
        across = [share for _dock, orientation, share in shares if orientation == Qt.Orientation.Horizontal]
        central = self.centralWidget()
        if central is not None and across and central.width() < LEAST_SHARE * (1 - sum(across)) * self.width():
            self._apply_proportions()
            return
        for dock, orientation, share in shares:
            horizontal = orientation == Qt.Orientation.Horizontal
            size, total = (dock.width(), self.width()) if horizontal else (dock.height(), self.height())
            if size < LEAST_SHARE * share * total:
                self._apply_proportions()
                return

    def childEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().childEvent(event)
        if event.added():  # the layout makes tab bars as panels are stacked or an arrangement restored
            QTimer.singleShot(0, self._whole_tab_titles)

    def _whole_tab_titles(self) -> None:
        """Stacked panels' tabs keep their whole titles and the bar scrolls: elided at 1280x800, the Dissection's
        six tabs read "Beam...", "L...", "Uni...", "Se...", "B..."."""
        for bar in self.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
            bar.setElideMode(Qt.TextElideMode.ElideNone)
            bar.setUsesScrollButtons(True)

    def _apply_proportions(self) -> None:
        for orientation, total in ((Qt.Orientation.Horizontal, self.width()), (Qt.Orientation.Vertical, self.height())):
            keys = [k for k, o in self.proportions if o == orientation]
            if keys:
                self.resizeDocks([self.panels[k] for k in keys],
                                 [int(self.proportions[(k, orientation)] * total) for k in keys], orientation)

    def restore(self, state: QByteArray | None) -> None:
        """The arrangement saved by `saveState()` (applied once the area is first shown)."""
        if state is None or state.isEmpty():
            return
        if self.default_state is None:
            self._saved = state
        else:
            self.restoreState(state)
            QTimer.singleShot(0, self.fit)

    def reset(self) -> None:
        """Back to the default arrangement (every panel shown)."""
        for dock in self.panels.values():
            dock.setFloating(False)
            dock.show()
        if self.default_state is not None:
            self.restoreState(self.default_state)
            self._apply_proportions()  # the default shares of the area as large as it is now
        else:
            self._saved = None
