"""Computation and file formats. Never imports Qt: it serves the GUI, the command line and remote workers."""
