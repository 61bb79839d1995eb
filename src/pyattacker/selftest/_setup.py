"""How a selftest part attacks: from this process, or from worker processes.

``selftest --workers N`` runs each part's attacks on N worker processes
(:func:`pyattacker.attack.run_workers`), and ``--server-processes M`` gives the echo
server M processes behind its one port: on a machine with cores to spare, the figures
say what ``attack --workers N`` keeps there, and whether the split costs CPU
(``docs/attack.md``, "Many processes, many machines").
"""

from __future__ import annotations

from dataclasses import dataclass

from pyattacker.attack import AttackPlan, AttackResult, run_attack, run_workers
from pyattacker.errors import ConfigError
from pyattacker.servers import check_processes

__all__ = ["MAX_PROCESSES", "ONE_PROCESS", "Setup", "check_setup"]

#: At most this many workers or server processes: each level's 256 connections are
#: divided among the workers, and none may have none.
MAX_PROCESSES = 256


@dataclass(frozen=True)
class Setup:
    """``workers`` attacking processes (1: this process itself) against an echo server
    of ``server_processes`` processes."""

    workers: int = 1
    server_processes: int = 1

    def attack(self, plan: AttackPlan) -> AttackResult:
        """Run ``plan`` as the setup says: in this process, or on the workers (merged)."""
        if self.workers == 1:
            return run_attack(plan, stop_on_signals=False)
        return run_workers(plan, self.workers)


#: The default: this process attacks one echo server process.
ONE_PROCESS = Setup()


def check_setup(setup: Setup) -> None:
    """``ConfigError`` naming the flag when the setup cannot run on this machine."""
    for flag, n in (("--workers", setup.workers), ("--server-processes", setup.server_processes)):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PROCESSES:
            raise ConfigError(
                f"must be 1 to {MAX_PROCESSES}, not {n!r}",
                field=flag,
                hint=f"e.g. {flag} 2",
            )
    check_processes(setup.server_processes, "--server-processes")
