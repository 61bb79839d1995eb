"""The attack job: load models, the engine that drives them, and what it measured.

See ``docs/attack.md``.
"""

from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._lag import LAG_WARN_S
from pyattacker.attack._limits import flag_of
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ARRIVALS, ClosedModel, LoadModel, OpenModel, Stage
from pyattacker.attack._merge import WorkerFacts, WorkersResult, merge_outcomes
from pyattacker.attack._plan import KEY_PLACEHOLDER, METHODS, AttackPlan, Target
from pyattacker.attack._processes import run_workers, usable_cores
from pyattacker.attack._result import AttackResult
from pyattacker.attack._run import attack, run_attack, run_on_fast_loop
from pyattacker.attack._samples import SampleWriter
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._sweep import SweepLevel, SweepResult, SweepSpec, sweep
from pyattacker.attack._warmup import Warmup
from pyattacker.attack._workers import WorkerOutcome, run_worker, work, worker_plan

__all__ = [
    "ARRIVALS",
    "KEY_PLACEHOLDER",
    "LAG_WARN_S",
    "METHODS",
    "AttackPlan",
    "AttackResult",
    "ClosedModel",
    "Engine",
    "HttpSender",
    "LlmSpec",
    "LoadModel",
    "OpenModel",
    "Progress",
    "SampleWriter",
    "Sender",
    "Stage",
    "SweepLevel",
    "SweepResult",
    "SweepSpec",
    "Target",
    "Warmup",
    "WorkerFacts",
    "WorkerOutcome",
    "WorkersResult",
    "attack",
    "flag_of",
    "merge_outcomes",
    "run_attack",
    "run_on_fast_loop",
    "run_worker",
    "run_workers",
    "sweep",
    "usable_cores",
    "work",
    "worker_plan",
]
