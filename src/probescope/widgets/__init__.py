"""Reusable Qt/pyqtgraph views of plain data (arrays, tables, small dataclasses). No torch, no algorithms."""
