"""Figures from the window's views: the export dialog and its presets, PNG/SVG/PDF writing, the figure menu and
actions."""
