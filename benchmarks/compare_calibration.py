"""How often `pyattacker compare` flags a difference that is not there, and misses one that is.

Attack reports are made by the real engine on virtual time against a server whose hold
times are a seeded lognormal (`tests/simulated_reports.py`): pairs of runs against the
same server (any flag is a false alarm) and pairs at a median of 2 ms then 6 ms (no flag
is a miss). Virtual time keeps this machine's load out of it: compare judges the noise
within each run, and the load a busy machine adds between two runs is no report's to see.

    python benchmarks/compare_calibration.py [--pairs 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from pyattacker.report import compare_reports
from simulated_reports import simulated_attack_report


def regressions(a: Path, b: Path) -> list[str]:
    comparison = compare_reports(json.loads(a.read_text()), json.loads(b.read_text()))
    return [row.figure for row in comparison.regressions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()
    false_alarms = misses = 0
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        for i in range(args.pairs):
            same_a = simulated_attack_report(0.006, 100 + i, where / "a.json")
            same_b = simulated_attack_report(0.006, 200 + i, where / "b.json")
            false_alarms += bool(regressions(same_a, same_b))
            fast = simulated_attack_report(0.002, 300 + i, where / "fast.json")
            slow = simulated_attack_report(0.006, 400 + i, where / "slow.json")
            misses += not regressions(fast, slow)
    print(f"same server:    {false_alarms} of {args.pairs} pairs flagged (false alarms)")
    print(f"2 ms then 6 ms: {misses} of {args.pairs} pairs not flagged (misses)")


if __name__ == "__main__":
    main()
