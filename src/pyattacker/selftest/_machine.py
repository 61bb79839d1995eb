"""What machine a selftest ran on, so figures from different machines compare."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["machine"]


def machine() -> dict[str, Any]:
    """CPU count (usable by this process, and in the machine), Python, OS, architecture,
    the event loop the attack runs on (uvloop where installed), and the load average
    (1, 5 and 15 minutes; ``None`` where the OS has none) when the check started."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    try:
        loop = f"uvloop {version('uvloop')}"
    except PackageNotFoundError:  # pragma: no cover - uvloop is a dependency except on Windows
        loop = "asyncio"
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "loop": loop,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
