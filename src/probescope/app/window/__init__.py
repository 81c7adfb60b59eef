"""The window's shell: the main window and its menus, dialogs, source bar, saved settings, theme, layout of panels,
the workspace base class and `probescope gui` (launch.py)."""
