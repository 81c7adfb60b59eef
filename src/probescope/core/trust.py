"""Which files may run code when they are loaded: the user's trust decision, by content (SHA-256), never by name.

Unpickling a whole-model pickle runs code from the file, a TorchScript archive carries its own code (run when
it is loaded and called: it can read and write files), and loading a torch.export program unpickles parts of it
(probescope.core.models.exported). Such a file is first hashed in chunks (an untrusted one is refused without
ever being held in memory whole); a trusted one is then read into memory, hashed again, and loaded from those very
bytes only when that hash is trusted too, so a file swapped after the decision is refused. Trust comes from the person
running probescope: `--trust FILE` / `--trust-code` on the command line, or the app's dialog (remembered per hash).
A manifest, a saved result or a recent-files list never carries it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from probescope.core.errors import InputError

HASH_CHUNK = 1 << 20  # bytes per read when hashing: a file is never read whole just to be hashed


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 of a file's content; InputError when it cannot be read."""
    path = Path(path)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path) from None
    return digest.hexdigest()


@dataclass(frozen=True)
class Trust:
    """The SHA-256 hashes of the files the user trusts to run code; `everything` is `--trust-code`."""

    hashes: frozenset[str] = frozenset()
    everything: bool = False

    def allows(self, sha256: str) -> bool:
        return self.everything or sha256 in self.hashes

    @staticmethod
    def of_files(paths: list[str | Path], everything: bool = False) -> Trust:
        """Trust the current content of each named file (the command line's `--trust FILE`)."""
        for path in paths:
            if not Path(path).is_file():
                raise InputError("--trust: no such file", path)
        return Trust(frozenset(sha256_of(p) for p in paths), everything)


NO_TRUST = Trust()


class UntrustedFile(InputError):
    """A file that would run code, refused because the user has not trusted its content (`sha256`)."""

    def __init__(self, path: Path, sha256: str, kind: str):
        self.sha256, self.kind = sha256, kind
        super().__init__(f"refusing to load: a {kind} runs code from the file when loaded; if you trust its source, "
                         f"pass --trust FILE (or --trust-code) (SHA-256 {sha256})", path)


def read_trusted(path: Path, trust: Trust, kind: str) -> bytes:
    """The file's bytes, when their SHA-256 is trusted; UntrustedFile otherwise (nothing of it has run).

    The file is hashed in chunks first, so an untrusted one (say a program behind gigabytes of padding) is refused
    in bounded memory. A trusted one is then read whole and hashed again, so the bytes returned are exactly the
    bytes whose hash was checked; content swapped between the two reads is refused like any untrusted content."""
    sha256 = sha256_of(path)
    if not trust.allows(sha256):
        raise UntrustedFile(path, sha256, kind)
    try:
        data = path.read_bytes()  # the user trusts this content: it is loaded from these bytes, hashed here again
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path) from None
    sha256 = hashlib.sha256(data).hexdigest()
    if not trust.allows(sha256):
        raise UntrustedFile(path, sha256, kind)
    return data
