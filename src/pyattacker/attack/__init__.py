"""The attack job: load models, the engine that drives them, and what it measured.

See ``docs/attack.md``.
"""

from pyattacker.attack._data import ORDERS, DataRows
from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._flow_client import FlowClient, HttpSteps, Step, StepFailed, StepSender
from pyattacker.attack._flow_stats import FLOW_CODE, FlowStats
from pyattacker.attack._lag import LAG_SHARE, LAG_WARN_S, lag_is_large
from pyattacker.attack._limits import flag_of
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ARRIVALS, ClosedModel, LoadModel, OpenModel, Stage
from pyattacker.attack._merge import WorkerFacts, WorkersResult, merge_outcomes
from pyattacker.attack._mix import Mix, MixLine
from pyattacker.attack._mix_send import MixSender
from pyattacker.attack._plan import KEY_PLACEHOLDER, METHODS, AttackPlan, Target
from pyattacker.attack._processes import run_workers, usable_cores
from pyattacker.attack._ray_clock import ClockOffset, measure_offset, on_common_clock
from pyattacker.attack._ray_workers import ACTOR_PREFIX, WorkerActor, run_ray_workers
from pyattacker.attack._result import AttackResult
from pyattacker.attack._run import attack, plugin_sender, run_attack, run_on_fast_loop
from pyattacker.attack._sample_parts import SampleParts
from pyattacker.attack._samples import SampleWriter, samples_kind
from pyattacker.attack._scenario import RowProvider, Scenario, load_scenario
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._sweep import SweepLevel, SweepResult, SweepSpec, sweep
from pyattacker.attack._taps import FetchedTap, HeldTap, RecordTap, WorkerTap
from pyattacker.attack._targets_file import line_from_object, read_targets
from pyattacker.attack._warmup import Warmup
from pyattacker.attack._workers import WorkerOutcome, run_worker, work, worker_plan

__all__ = [
    "ACTOR_PREFIX",
    "ARRIVALS",
    "FLOW_CODE",
    "KEY_PLACEHOLDER",
    "LAG_SHARE",
    "LAG_WARN_S",
    "METHODS",
    "ORDERS",
    "AttackPlan",
    "AttackResult",
    "ClockOffset",
    "ClosedModel",
    "DataRows",
    "Engine",
    "FetchedTap",
    "FlowClient",
    "FlowStats",
    "HeldTap",
    "HttpSender",
    "HttpSteps",
    "LlmSpec",
    "LoadModel",
    "Mix",
    "MixLine",
    "MixSender",
    "OpenModel",
    "Progress",
    "RecordTap",
    "RowProvider",
    "SampleParts",
    "SampleWriter",
    "Scenario",
    "Sender",
    "Stage",
    "Step",
    "StepFailed",
    "StepSender",
    "SweepLevel",
    "SweepResult",
    "SweepSpec",
    "Target",
    "Warmup",
    "WorkerActor",
    "WorkerFacts",
    "WorkerOutcome",
    "WorkerTap",
    "WorkersResult",
    "attack",
    "flag_of",
    "lag_is_large",
    "line_from_object",
    "load_scenario",
    "measure_offset",
    "merge_outcomes",
    "on_common_clock",
    "plugin_sender",
    "read_targets",
    "run_attack",
    "run_on_fast_loop",
    "run_ray_workers",
    "run_worker",
    "run_workers",
    "samples_kind",
    "sweep",
    "usable_cores",
    "work",
    "worker_plan",
]
