"""A closed pipe on stdout (``... | head -1``) ends a command quietly: no traceback, no
``Exception ignored`` line at exit; the status is 141 (128 + SIGPIPE), as a command killed
by SIGPIPE reports. The pattern of the Python documentation (signal module, "Note on
SIGPIPE"): stdout pointed at devnull, so the interpreter's last flush has nowhere to fail.

    if __name__ == "__main__":
        raise SystemExit(guarded(main))
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

#: the exit status after the reader closed the pipe
CLOSED = 128 + signal.SIGPIPE


def closed() -> int:
    """Point stdout at devnull (whatever is still buffered is dropped) and return
    :data:`CLOSED`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (replaced, or closed)
        pass
    finally:
        os.close(devnull)
    return CLOSED


def guarded(main: Callable[[], int]) -> int:
    """``main()``'s status, its output flushed here; :func:`closed`'s if the reader went
    away."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        return closed()
    return code
