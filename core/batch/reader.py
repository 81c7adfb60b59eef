"""Reading a batch's output folder back (for the GUI's dissection workspace and scripts)."""

from __future__ import annotations

import json
from pathlib import Path

from probescope.core.batch.status import FORMAT, STATUS_FILE
from probescope.core.errors import InputError


def open_batch(out: str | Path) -> list[tuple[str, str, Path]]:
    """(model, layer, dissection.json path) of every merged layer in a batch output folder, in manifest order
    (layers still running are left out; status.json says how far they are). InputError when the folder holds no
    batch status."""
    out = Path(out)
    path = out / STATUS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InputError("not a probescope batch status", path)
        jobs = [(str(j["model"]), str(j["layer"]), out / str(j["folder"]) / "dissection.json") for j in doc["jobs"]]
    except FileNotFoundError:
        raise InputError("not a batch output folder (no status.json)", out) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"damaged batch status ({type(exc).__name__}: {exc})", path) from None
    return [j for j in jobs if j[2].is_file()]
