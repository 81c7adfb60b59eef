"""docs/api.md is the Python API for notebooks: its code blocks run, in order, as one script in a fresh interpreter
(a folder of its own as the working folder; the demo world made small), and what they print is what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_the_api_page_runs_as_written(tmp_path, isolated_cache):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 4
    script = tmp_path / "api.py"
    script.write_text("\n".join(blocks))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    for shown in re.findall(r"^# prints: (.*)$", DOC.read_text(), re.M):
        assert re.search(shown, run.stdout), (shown, run.stdout[-2000:])
