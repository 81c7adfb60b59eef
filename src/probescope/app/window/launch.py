"""`probescope gui`: open the desktop application, on the demo world unless told to open something else.

With `--screenshot OUT.png` (or `.svg`, `.pdf`: the vector export) the window loads, waits until the chosen
workspace's initial work is done, renders at `--size`, writes the file and exits 0 (with one line on stderr: 2
when an input is refused, as for every command, 1 when loading fails otherwise or times out); with `--preset`, it
writes the figure the export dialog's preset writes (the same function), so a paper's figures can be remade by a
script. Screenshot runs use a throwaway settings file and the
offscreen platform unless `QT_QPA_PLATFORM` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

from probescope.app.compute.threads import keep_gui_responsive
from probescope.app.window import splash
from probescope.assets import ASSETS_DIR
from probescope.core import bounds, environment
from probescope.core.devices import available_devices, device_problem, devices_of_a_child
from probescope.core.errors import InputError
from probescope.jobs.arguments import BoundedArg, NumbersArg, add_trust_arguments, device_name_arg, trust_from_args
from probescope.jobs.batch.reader import read_batch
from probescope.jobs.inputs import DEMO, OpenRequest
from probescope.jobs.kernel.spec import kernel_arg, kernel_from_args
from probescope.jobs.protocol import describe_error

WORKSPACE_NAMES = ("dissection", "gallery", "similarity")
PRESET_KEYS = ("column", "page", "screen")  # probescope.app.figures.export.PRESETS (not imported here: it loads Qt)
DEFAULT_SIZE = "1400x900"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", choices=WORKSPACE_NAMES, help="workspace to show first")
    parser.add_argument("--model", metavar="SPEC", help="model spec or file: demo, <arch>:<weights> (resnet50, "
                        "vit_b_16, swin_t, ...), places365:<arch>:<checkpoint>, timm:<name>:<weights>, "
                        "openclip:<name>:<weights>, dinov2:<vits14|...>[-reg]:<weights>, torchscript:<file>, "
                        "export:<file.pt2>, or a file to detect")
    parser.add_argument("--dataset", metavar="DIR", help="probing dataset folder (Broden format), or one of its "
                        "index files to open only its rows (e.g. DIR/index_ade20k.csv)")
    parser.add_argument("--batch", metavar="DIR", type=Path, help="a `probescope batch` output folder to browse in the "
                        "Dissection workspace (the demo model and dataset are then not opened unless asked for)")
    parser.add_argument("--samples", metavar="PATH", help="generator samples: a folder of images, a .npz/.npy, or a "
                        "TorchScript generator (with --generator)")
    parser.add_argument("--generator", metavar="Z,N[,C]", type=NumbersArg(
                        (bounds.NOISE, bounds.SAMPLES, bounds.CLASSES), ",", "128,50000 or 128,50000,1000", optional=1),
                        help="--samples is a TorchScript generator G(z[, class]): "
                        "noise size Z, N samples to draw, C classes (0 or absent: unconditional)")
    parser.add_argument("--judgments", metavar="FILE", help="similarity judgments (.hdf5, .zip, folder, .csv)")
    parser.add_argument("--catalog", metavar="FILE", help="catalog of the judgments' stimuli")
    parser.add_argument("--image-root", metavar="DIR", help="folder the catalog's image paths start from")
    parser.add_argument("--index-base", type=int, choices=(0, 1), metavar="0|1",
                        help="how a psiz .hdf5 judgments file numbers its stimuli, when neither it nor a catalog tells")
    parser.add_argument("--device", type=device_name_arg,
                        help="compute device (cpu, cuda, cuda:1, mps) of the machine that computes (this one, or a "
                             "Ray kernel's); default: the saved setting")
    parser.add_argument("--kernel", type=kernel_arg, default="local", metavar="thread|local|ray://HOST:PORT",
                        help="where the computation runs: 'local' (a compute kernel process of its own, which owns "
                             "torch and the GPU: a crash or a long computation there leaves the window responsive), "
                             "'thread' (in the window's own process) or a Ray Client address (the kernel as an actor "
                             "on that cluster, with a GPU for --device cuda: docs/cluster.md); default: local")
    parser.add_argument("--kernel-insecure", action="store_true",
                        help="connect to a Ray cluster on another machine although Ray's token authentication is not "
                             "set up (anyone who can reach that cluster can run code on it)")
    parser.add_argument("--theme", choices=("system", "light", "dark"), help="colour theme for this run")
    parser.add_argument("--screenshot", metavar="OUT.png|svg|pdf", type=Path,
                        help="render the window to OUT (PNG, or SVG/PDF vectors) once the workspace has loaded, "
                        "then exit")
    parser.add_argument("--view", metavar="NAME", help="with --screenshot: export this view of the workspace instead "
                        "of the window (a name from File > Export Figure, e.g. 'Unit card'); the demo inputs the "
                        "workspace shows nothing of are then not opened")
    parser.add_argument("--panel", metavar="KEY", help="with --screenshot: bring this panel of the workspace to the "
                        "front first (e.g. role, layer, real)")
    parser.add_argument("--unit", type=BoundedArg(bounds.UNIT), metavar="N",
                        help="with --screenshot and the dissection workspace: show "
                        "unit N")
    parser.add_argument("--preset", choices=PRESET_KEYS, help="with --screenshot: write the figure the export "
                        "dialog's preset writes: 'column' (3.5 in), 'page' (7 in) or 'screen' (the view's own size); "
                        "PNG at the preset's dpi, light colours unless the settings' export defaults follow the theme")
    parser.add_argument("--size", default=DEFAULT_SIZE, metavar="WxH", help=f"window size (default {DEFAULT_SIZE})",
                        type=NumbersArg((bounds.WINDOW_WIDTH, bounds.WINDOW_HEIGHT), "x", "1400x900"))
    parser.add_argument("--timeout", type=BoundedArg(bounds.SECONDS), default=600.0, metavar="S",
                        help="longest wait for --screenshot (seconds, default 600)")
    parser.add_argument("--settings", metavar="FILE", type=Path,
                        help="settings file to use instead of the user's (an .ini file)")
    add_trust_arguments(parser)


def requests(args: argparse.Namespace) -> list:
    """What to open: each input from its flag, the demo world's otherwise."""
    if (args.catalog or args.image_root or args.index_base is not None) and not args.judgments:
        raise InputError("--catalog, --image-root and --index-base go with --judgments")
    if args.generator and not args.samples:
        raise InputError("--generator goes with --samples GENERATOR_FILE")
    generator: tuple[int, ...] = args.generator or ()
    batch = args.batch
    if batch is not None:
        read_batch(batch)  # a wrong folder stops here, with its one-line message
    return [
        *([OpenRequest("model", args.model or DEMO)] if args.model or batch is None else []),
        *([OpenRequest("dataset", args.dataset or DEMO)] if args.dataset or batch is None else []),
        OpenRequest("samples", args.samples or DEMO, generator=generator),
        OpenRequest("judgments", args.judgments or DEMO, args.catalog or "", args.image_root or "",
                    index_base=args.index_base),
    ]


def limit_blas_threads() -> None:
    """OpenBLAS threads for the GUI process, set before NumPy loads (it reads them once): half of the cores the
    compute thread leaves. The I/O pool reads scores (FID's eigenvalue problem, distances) beside the compute thread
    and the GUI thread; BLAS threads spinning on cores those need cost more than they give (measured on 2 busy
    cores: a 128 x 128 eigh took 22-31 ms with 2 threads, 1.8 ms with 1). The user's own setting wins."""
    cores = os.cpu_count() or 2
    environment.default(environment.BLAS_THREADS, str(max(1, (cores - 1) // 2)))


def run(args: argparse.Namespace) -> int:
    limit_blas_threads()
    size = args.size
    to_open = requests(args)
    trust = trust_from_args(args)
    kernel = kernel_from_args(args.kernel, args.kernel_insecure)  # a cluster it must not reach: refused here
    if args.device is not None and not kernel.is_remote:  # computed on this machine: its devices decide, now
        problem = device_problem(args.device, listed=available_devices if args.kernel == "thread"
                                 else devices_of_a_child)  # (torch stays out of the window's process)
        if problem is not None:
            raise InputError(f"argument --device: {problem}")
    if args.screenshot is not None:
        environment.default(environment.QT_PLATFORM, "offscreen")
    if args.kernel == "local":  # its torch import runs while this process imports Qt and builds the window
        # (lazy: `probescope --help` imports this module; multiprocessing and the kernel add 25 ms to it)
        from probescope.jobs.kernel import local

        local.start_early()
    launch = splash.start() if args.screenshot is None else None  # on screen while the window loads
    if args.kernel == "thread":  # the computation shares this process: torch before Qt, its thread count once
        # (torch: only the thread kernel computes in the window's process; workers imports Qt, after torch)
        import torch

        from probescope.app.compute.workers import compute_threads

        torch.set_num_threads(compute_threads())
    # (Qt: after the kernel's start and the splash; `probescope --help` and the headless commands import this
    # module, never Qt)
    from PySide6.QtWidgets import QApplication

    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import THEME, Settings
    from probescope.app.window.theme import apply_theme

    app = QApplication.instance()
    if app is None:  # (an application made by the caller keeps its own message handler: a test's)
        app = QApplication([sys.argv[0]])
        quiet_platform_notes()
    app.setApplicationName("probescope")
    app.setOrganizationName("probescope")
    app.setDesktopFileName("io.github.probescope.Probescope")  # the .desktop file (packaging/linux) for taskbars
    app.setWindowIcon(_app_icon())
    if args.screenshot is not None:
        return _screenshot(app, args, size, to_open, trust, kernel)
    settings = Settings(args.settings)
    apply_theme(app, args.theme or settings.get(THEME))
    window = MainWindow(settings, device=args.device, trust=trust, kernel=kernel)
    _print_notes(settings)
    keep_gui_responsive()
    if args.workspace:
        window.set_workspace(args.workspace)
    for request in to_open:
        window.open(request)
    if args.batch is not None:
        window.open_batch(args.batch)
    window.show()
    splash.close(launch)
    _close_on_signals(window)
    _notify_uncaught(window)
    return app.exec()


def _print_notes(settings) -> None:
    """The saved settings the window did not use, one line each (the window shows them too)."""
    for note in settings.notes:
        print(f"probescope gui: note: {note}", file=sys.stderr)


PLATFORM_NOTES = ("does not support propagateSizeHints",)  # the offscreen platform's, at every dock resize


def quiet_platform_notes() -> None:
    """Qt's messages go to stderr as before, less the platform plugin's notes that say nothing to the user (the
    offscreen platform, which --screenshot uses, notes at every dock's resize that it cannot pass size hints)."""
    # (Qt: `probescope --help` and the headless commands import this module, never Qt)
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_kind, _context, message: str) -> None:
        if not any(note in message for note in PLATFORM_NOTES):
            print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def _app_icon():
    """The icon set in assets/icons, every size, so each place the desktop shows it picks the sharpest."""
    from PySide6.QtGui import QIcon  # (Qt: `probescope --help` and the headless commands import this module, never Qt)

    icon = QIcon()
    for png in sorted((ASSETS_DIR / "icons").glob("probescope-*.png")):
        icon.addFile(str(png))
    return icon


def _notify_uncaught(window) -> None:
    """An exception escaping a slot becomes a notification (and a line on stderr), never a silent failure."""

    def hook(exc_type, exc, tb) -> None:
        error = describe_error("probescope", exc.with_traceback(tb))
        print(error.details, file=sys.stderr)
        window.notify(error.message, error.details)

    sys.excepthook = hook


def _close_on_signals(window) -> None:
    """Ctrl+C or SIGTERM closes the window as its close button does: tasks cancelled, settings saved."""
    # (Qt: `probescope --help` and the headless commands import this module, never Qt)
    from PySide6.QtCore import QTimer

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: window.close())
    timer = QTimer(window)  # lets the Python interpreter run its signal handlers while Qt's loop waits
    timer.timeout.connect(lambda: None)
    timer.start(250)


def _screenshot(app, args: argparse.Namespace, size: tuple[int, int], to_open: list, trust, kernel) -> int:
    # (Qt: `probescope --help` and the headless commands import this module, never Qt)
    from PySide6.QtCore import QEventLoop, QTimer

    from probescope.app.figures.export import export_preset, export_widget, format_of, preset_named
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import EXPORT_DEFAULTS, Settings
    from probescope.app.window.theme import apply_theme

    out = Path(args.screenshot)
    format_of(out)  # .png, .svg or .pdf, else one line before any window opens
    with tempfile.TemporaryDirectory(prefix="probescope-screenshot-") as tmp:
        settings = Settings(args.settings or Path(tmp) / "settings.ini")
        apply_theme(app, args.theme or "light")
        window = MainWindow(settings, device=args.device, trust=trust, ask_trust=False,  # nobody to ask
                            kernel=kernel)
        _print_notes(settings)
        keep_gui_responsive()
        window.resize(*size)
        window.set_workspace(args.workspace or "dissection")
        workspace = window.current_workspace()
        if args.panel is not None and args.panel not in workspace.area.panels:
            window.close()
            raise InputError(f"--panel: the {workspace.title} workspace has no panel {args.panel!r} (its panels: "
                             f"{', '.join(workspace.area.panels)})")
        if args.panel is not None:
            workspace.area.raise_panel(args.panel)
        if args.view is not None:  # one view: the demo inputs it shows nothing of are not opened, nor waited for
            to_open = [r for r in to_open if r.kind in workspace.reads or getattr(args, r.kind) is not None]
        failures: list = []  # TaskError
        loop = QEventLoop()

        def check() -> None:  # done once the workspace has its content and nothing else is still loading
            if failures or (workspace.is_initial_work_done and not window.pool.active()):
                loop.quit()

        window.pool.failed.connect(lambda _h, error: failures.append(error))
        window.pool.finished.connect(check)
        workspace.initial_work_done.connect(check)
        QTimer.singleShot(int(args.timeout * 1000), loop.quit)
        window.show()
        for request in to_open:
            window.open(request)
        if args.batch is not None:
            window.open_batch(args.batch)
        loop.exec()
        try:
            if failures:
                if failures[0].input_error:  # an input refused: exit 2, as every command's refusals
                    raise InputError(failures[0].message)
                print(f"probescope gui: error: {failures[0].message}", file=sys.stderr)  # a bug: exit 1
                return 1
            if not workspace.is_initial_work_done:
                print(f"probescope gui: error: the {workspace.title} workspace did not finish loading within "
                      f"{args.timeout:g} s", file=sys.stderr)
                return 1
            if args.unit is not None:
                _show_unit(workspace, args.unit)
                QTimer.singleShot(0, check)
                loop.exec()  # until what the unit's views asked for is done
            for _ in range(5):  # let the last results lay themselves out
                app.processEvents()
            widget = window if args.view is None else _view(workspace, args.view)
            if args.preset is None:
                export_widget(widget, out)
                size = f"{widget.width()}x{widget.height()}"
            else:
                defaults, preset = settings.get(EXPORT_DEFAULTS), preset_named(args.preset)
                export_preset(widget, out, preset, margin_free=defaults.margin_free,
                              follow_theme=defaults.follow_theme)
                size = preset.name.lower()
            print(f"wrote {out} ({size})", file=sys.stderr)
            return 0
        finally:
            window.close()


def _show_unit(workspace, unit: int) -> None:
    units = getattr(workspace, "units", None)
    if workspace.name != "dissection" or units is None or not units.select_unit(unit):
        raise InputError(f"--unit: no unit {unit} in the {workspace.title} workspace's table")


def _view(workspace, name: str):
    """The workspace's export target called `name` (any case)."""
    targets = {t.name.lower(): t.widget for t in workspace.export_targets()}
    if name.lower() not in targets:
        raise InputError(f"--view: the {workspace.title} workspace has no view {name!r} (its views: "
                         f"{', '.join(t.name for t in workspace.export_targets())})")
    return targets[name.lower()]
