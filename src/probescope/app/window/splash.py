"""The launch splash: a small separate process (PySide6 only, no torch) that puts a window on screen within about
half a second of `probescope` starting, while the main process imports torch (which must come before Qt there) and
builds the window. It closes when the main process closes its end of the pipe: the window is up, or it died.

    python -m probescope.app.window.splash      # prints 'shown' once on screen; quits when its stdin closes
"""

from __future__ import annotations

import subprocess
import sys
import threading

from probescope import __version__
from probescope.assets import ASSETS_DIR
from probescope.core.environment import splash_wanted

CLOSE_AFTER_MS = 180_000  # the splash never outlives a launch that hangs


def start() -> subprocess.Popen | None:
    """Start the splash for a window launch (not offscreen); None when it cannot show."""
    if not splash_wanted():
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "probescope.app.window.splash"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def close(splash: subprocess.Popen | None) -> None:
    """Tell the splash to go (its stdin ends) and reap it when it has gone, in a thread of its own: it stayed a
    `<defunct>` child of the window for as long as the window was open."""
    if splash is not None and splash.stdin is not None:
        splash.stdin.close()
        threading.Thread(target=splash.wait, name="probescope-splash-reaper", daemon=True).start()


def main() -> int:
    # (Qt: `probescope --help` and the headless commands import this module through launch, never Qt)
    from PySide6.QtCore import QSocketNotifier, Qt, QTimer
    from PySide6.QtGui import QColor, QPixmap
    from PySide6.QtWidgets import QApplication, QSplashScreen

    app = QApplication([sys.argv[0]])
    pixmap = QPixmap(str(ASSETS_DIR / "icons" / "probescope-256.png"))
    if pixmap.isNull():
        pixmap = QPixmap(256, 256)
        pixmap.fill(QColor("#2b2d30"))
    splash = QSplashScreen(pixmap)
    splash.show()
    splash.showMessage(f"probescope {__version__}: loading torch and the demo world…",
                       Qt.AlignmentFlag.AlignBottom | Qt.AlignmentFlag.AlignHCenter, QColor("white"))
    app.processEvents()
    print("shown", flush=True)
    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(app.quit)  # readable: the main process wrote or closed its end
    QTimer.singleShot(CLOSE_AFTER_MS, app.quit)
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
