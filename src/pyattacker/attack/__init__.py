"""The attack job: load models, the engine that drives them, and what it measured.

See ``docs/attack.md``.
"""

from pyattacker.attack._data import ORDERS, DataRows
from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._lag import LAG_WARN_S
from pyattacker.attack._limits import flag_of
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ARRIVALS, ClosedModel, LoadModel, OpenModel, Stage
from pyattacker.attack._mix import Mix, MixLine
from pyattacker.attack._mix_send import MixSender
from pyattacker.attack._plan import KEY_PLACEHOLDER, METHODS, AttackPlan, Target
from pyattacker.attack._result import AttackResult
from pyattacker.attack._run import attack, run_attack, run_on_fast_loop
from pyattacker.attack._samples import SampleWriter
from pyattacker.attack._send import HttpSender, Sender
from pyattacker.attack._targets_file import line_from_object, read_targets

__all__ = [
    "ARRIVALS",
    "KEY_PLACEHOLDER",
    "LAG_WARN_S",
    "METHODS",
    "ORDERS",
    "AttackPlan",
    "AttackResult",
    "ClosedModel",
    "DataRows",
    "Engine",
    "HttpSender",
    "LlmSpec",
    "LoadModel",
    "Mix",
    "MixLine",
    "MixSender",
    "OpenModel",
    "Progress",
    "SampleWriter",
    "Sender",
    "Stage",
    "Target",
    "attack",
    "flag_of",
    "line_from_object",
    "read_targets",
    "run_attack",
    "run_on_fast_loop",
]
