"""Shipped files: icons and the demo model's weights."""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
