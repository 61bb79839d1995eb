"""A server started by :class:`~pyattacker.servers.EchoServerProcess` (or any
``ServerProcess``) stops when the process that started it dies, however it dies.

Why: a parent killed before it runs ``stop()`` (SIGKILL, a CI timeout killing pytest,
``pkill -f script.py``) would otherwise leave its server serving a port and burning a core
forever, adopted by init. So ``ServerProcess`` gives the child a pipe on stdin that it
keeps open and never writes, and sets :data:`PARENT_PIPE_ENV` for it. The kernel closes
the parent's end of the pipe when the parent exits, by a signal or otherwise, so the child
reads EOF; :func:`stop_when_parent_dies` then sends the child's main thread SIGTERM, and
the server stops exactly as on ``kill -TERM`` (a ``--processes N`` supervisor stops its
members too). Should that hang, the process exits :data:`LAST_RESORT_S` seconds later.

Why not Linux's ``PR_SET_PDEATHSIG``: it fires when the parent *thread* that started the
child ends (a server started from a worker thread would die with the thread), it must be
set between fork and exec (``preexec_fn``, unsafe in a threaded parent), and it is Linux
only. The pipe works wherever pipes and threads do.

Why only when told: a server run by hand (``pyattacker echo-server`` in a terminal, under
``nohup``, with stdin closed or ``/dev/null``) must never stop because of its stdin; only
a child whose environment carries the variable watches it, and the variable is removed
at once, so nothing the server starts inherits it.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["LAST_RESORT_S", "PARENT_PIPE_ENV", "stop_when_parent_dies"]

#: Set to ``"stdin"`` by ``ServerProcess``: fd 0 is a pipe its parent holds open.
PARENT_PIPE_ENV = "PYATTACKER_PARENT_PIPE"
#: How long after the SIGTERM a server that has not exited is ended by ``os._exit(1)``
#: (what ``ServerProcess.stop`` does with SIGKILL after its grace).
LAST_RESORT_S = 10.0


def stop_when_parent_dies() -> bool:
    """When :data:`PARENT_PIPE_ENV` is ``"stdin"``: remove it from ``os.environ`` and watch
    stdin in a daemon thread; at EOF (or an error reading it), SIGTERM this process's main
    thread. Returns whether it watches; otherwise it does nothing (stdin is not read)."""
    if os.environ.pop(PARENT_PIPE_ENV, None) != "stdin":
        return False
    threading.Thread(target=_watch, name="pyattacker-parent-pipe", daemon=True).start()
    return True


def _watch() -> None:
    try:
        while os.read(0, 4096):  # the parent never writes; anything read is ignored
            pass
    except OSError:  # no stdin at all: nobody holds it open for us either
        pass
    _terminate()
    threading.Event().wait(LAST_RESORT_S)  # a daemon thread: gone if the process exits
    os._exit(1)


def _terminate() -> None:
    """SIGTERM to the main thread: its handlers run and its blocking call is interrupted."""
    main = threading.main_thread().ident
    if hasattr(signal, "pthread_kill") and main is not None:
        signal.pthread_kill(main, signal.SIGTERM)
    else:  # pragma: no cover - Windows: ends the process, as Popen.terminate() does
        os.kill(os.getpid(), signal.SIGTERM)
