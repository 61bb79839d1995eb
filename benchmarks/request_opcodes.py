"""Python bytecodes per request of the attack engine's direct path, by function.

Usage: ``.venv/bin/python benchmarks/request_opcodes.py [--requests 3000] [--top 40]
[--mix lines|templated]``

``request_instructions.py`` says how many machine instructions a request costs, in all;
this says where the Python part of them goes. It runs ``request_cost.py`` (the engine
against fake keep-alive connections) with a trace function that counts every bytecode
each function executes (``sys.settrace`` with ``f_trace_opcodes``), once with
``--requests`` and once with twice as many, and prints the difference divided by
``--requests`` for the functions that execute the most: start-up and the report cancel
out. A bytecode is not a unit of time (a ``LOAD_FAST`` costs a few instructions, a call
or an allocation hundreds), so read it beside the instruction count, to see which
functions do the most work per request and how a change moved it. Slow: the trace
function runs for every bytecode (about a minute for the default).

Work that happens once per batch or per window shows here divided by the requests of
this run, which is slower under the trace than a real one: a window's closing
(``coarsen``) weighs more here than at a real attack's rate.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
Key = tuple[str, str]


def counted(requests: int, mix: str) -> Counter[Key]:
    """Bytecodes executed per function over one ``request_cost.py`` run of ``requests``."""
    counts: Counter[Key] = Counter()

    def each_opcode(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_name)] += 1
        return each_opcode

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return each_opcode

    argv = sys.argv
    sys.argv = ["request_cost.py", "--requests", str(requests), "--runs", "1"]
    if mix != "none":
        sys.argv += ["--mix", mix]
    sys.settrace(on_call)
    try:
        runpy.run_path(str(HERE / "request_cost.py"), run_name="__main__")
    finally:
        sys.settrace(None)
        sys.argv = argv
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--top", type=int, default=40, help="how many functions to list")
    parser.add_argument("--mix", choices=["none", "lines", "templated"], default="none")
    args = parser.parse_args()
    low = counted(args.requests, args.mix)
    high = counted(2 * args.requests, args.mix)
    per = {key: (high[key] - low[key]) / args.requests for key in high.keys() | low.keys()}
    print(f"bytecodes per request: {sum(per.values()):,.0f}")
    for (filename, name), n in sorted(per.items(), key=lambda kv: -kv[1])[: args.top]:
        package = filename.rfind("pyattacker/")
        where = filename[package:] if package >= 0 else Path(filename).name
        print(f"{n:8.1f}  {where}:{name}")


if __name__ == "__main__":
    main()
