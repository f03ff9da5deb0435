"""Keep numba's on-disk kernel cache in step with the package's source.

Numba checks a cached kernel against the file the kernel is written in, and only that file. The
simulator's kernels call helpers from other files (``prefix_cache``, ``roofline``, ``cpp``…), so
after a change to a helper alone — a ``git pull`` of the course, or an edit — numba would load the
old machine code and silently give old results. On import, :func:`drop_stale` hashes the package's
``.py`` files that use numba; when the hash differs from the one stored beside the cache, it deletes the
package's cached kernels (``*.nbi``, ``*.nbc``) so that they compile again from the current
source (≈ 40 s, as on first use; ``python -m mooncake_lab warmup`` does it ahead).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["drop_stale", "source_hash", "cache_dirs"]

PACKAGE = Path(os.path.abspath(__file__)).parent   # as numba names it (abspath, symlinks kept)
STAMP = "mooncake_lab_sources.sha256"


def source_hash(package: Path = PACKAGE) -> str:
    """sha256 over the relative path and bytes of every ``.py`` file under ``package`` that
    mentions numba (``njit`` or ``numba``): the files compiled code can come from. Editing a plot
    or a notebook helper keeps the compiled kernels."""
    h = hashlib.sha256()
    for f in sorted(package.rglob("*.py")):
        data = f.read_bytes()
        if b"njit" in data or b"numba" in data:
            h.update(str(f.relative_to(package)).encode())
            h.update(data)
    return h.hexdigest()


def cache_dirs(package: Path = PACKAGE) -> list[Path]:
    """Where numba keeps the kernels of each folder of ``package``: its ``__pycache__``, or, when
    ``$NUMBA_CACHE_DIR`` is set, ``<that>/<folder name>_<sha1 of the folder's path>`` (numba's
    ``UserProvidedCacheLocator``)."""
    folders = [package] + sorted(p for p in package.rglob("*") if p.is_dir() and p.name != "__pycache__")
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return [Path(root) / f"{d.name}_{hashlib.sha1(str(d).encode()).hexdigest()}" for d in folders]
    return [d / "__pycache__" for d in folders]


def drop_stale(package: Path = PACKAGE) -> int:
    """Delete the package's cached kernels if its source changed since they were stored (or if no
    record says which source they came from); returns how many files were deleted. Never raises:
    where the cache cannot be read or written, numba's own checks are all there is."""
    try:
        dirs = cache_dirs(package)
        stamp = dirs[0] / STAMP
        now = source_hash(package)
        if stamp.is_file() and stamp.read_text().strip() == now:
            return 0
        gone = 0
        for d in dirs:
            for f in (*d.glob("*.nbi"), *d.glob("*.nbc")):
                f.unlink()
                gone += 1
        dirs[0].mkdir(parents=True, exist_ok=True)
        stamp.write_text(now + "\n")
        return gone
    except OSError:
        return 0
