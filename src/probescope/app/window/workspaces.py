"""The workspaces of the main window, in tab order (Ctrl+1, Ctrl+2, ...)."""

from __future__ import annotations

from probescope.app.dissection.workspace import DissectionWorkspace
from probescope.app.gallery.workspace import GalleryWorkspace
from probescope.app.similarity.workspace import SimilarityWorkspace
from probescope.app.window.workspace import Workspace

WORKSPACES: tuple[type[Workspace], ...] = (DissectionWorkspace, GalleryWorkspace, SimilarityWorkspace)
