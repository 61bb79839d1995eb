"""The attack job: load models, the engine that drives them, and what it measured.

See ``docs/attack.md``.
"""

from pyattacker.attack._engine import Engine, Progress
from pyattacker.attack._lag import LAG_SHARE, LAG_WARN_S, lag_is_large
from pyattacker.attack._limits import flag_of
from pyattacker.attack._llm import LlmSpec
from pyattacker.attack._load import ARRIVALS, ClosedModel, LoadModel, OpenModel, Stage
from pyattacker.attack._plan import KEY_PLACEHOLDER, METHODS, AttackPlan, Target
from pyattacker.attack._result import AttackResult
from pyattacker.attack._run import attack, run_attack, run_on_fast_loop
from pyattacker.attack._samples import SampleWriter
from pyattacker.attack._send import HttpSender, Sender

__all__ = [
    "ARRIVALS",
    "KEY_PLACEHOLDER",
    "LAG_SHARE",
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
    "Target",
    "attack",
    "flag_of",
    "lag_is_large",
    "run_attack",
    "run_on_fast_loop",
]
