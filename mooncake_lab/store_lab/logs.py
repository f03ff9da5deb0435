"""The lab's log folders in the temporary directory: made by the supervisor, removed by whichever side
survives (the supervisor on close, the kernel if the supervisor was killed), and swept when their
owner is dead (both were killed at once: a SIGKILLed kernel whose supervisor was SIGKILLed too).

Each folder holds an ``owner`` file: the supervisor's PID and its start time (clock ticks since boot,
``/proc/PID/stat`` field 22), so a PID reused by another process does not count as the owner alive.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

OWNER = "owner"


#: Prefix of the supervisor's log folder in the temporary directory; its ``owner`` file names the
#: supervisor (PID and start time), so a folder whose owner is dead can be swept (:func:`sweep`).
LOG_PREFIX = "mooncake-store-lab-"

def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or None if it is not running."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])   # state, …, starttime (field 22)


def claim_logdir(prefix: str) -> Path:
    """A new folder ``<tmp>/<prefix>XXXX`` owned by this process (its ``owner`` file)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    (d / OWNER).write_text(f"{os.getpid()} {start_time(os.getpid())}\n")
    return d


def owner_alive(d: Path) -> bool:
    try:
        pid, started = (d / OWNER).read_text().split()
        return start_time(int(pid)) == int(started)
    except (OSError, ValueError):
        return False


def remove(d) -> None:
    if d:
        shutil.rmtree(d, ignore_errors=True)


def sweep(prefix: str) -> list[Path]:
    """Remove this user's folders ``<tmp>/<prefix>*`` whose owner is dead (or that have no owner
    file and are over a minute old: an earlier version's); returns them."""
    gone = []
    for d in Path(tempfile.gettempdir()).glob(prefix + "*"):
        try:
            mine = d.is_dir() and not d.is_symlink() and d.stat().st_uid == os.getuid()
        except OSError:
            continue
        young = time.time() - d.stat().st_mtime < 60 and not (d / OWNER).exists()  # being made now
        if mine and not young and not owner_alive(d):
            remove(d)
            gone.append(d)
    return gone
