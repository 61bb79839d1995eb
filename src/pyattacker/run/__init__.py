"""The run job: tasks, pipelines, the Runner and its durable record.

A *task* is a unary function (sync or async, ``(value)`` or ``(value, ctx)``); a *pipeline*
is a chain of tasks over one seed; the ``Runner`` runs many pipelines across pools of
endpoints, checkpoints every task's output to a store, and resumes after anything dies.
See ``docs/run.md``.
"""

from pyattacker.run._codecs import DEFAULT_CODECS, Codec, CodecRegistry, register_codec
from pyattacker.run._fanout import fanout
from pyattacker.run._input import FieldKey, latest_input, not_read, resume_source
from pyattacker.run._pipeline import PipelineSpec, PipelineSpecs, PipelineTemplate, pipeline
from pyattacker.run._ray import check_ray_address
from pyattacker.run._runner import Runner
from pyattacker.run._shard import Shard, divide_pools, shard_of, shard_store_name
from pyattacker.run._sources import FORMATS as INPUT_FORMATS
from pyattacker.run._sources import FileSource, InputChanged, range_rows, read_rows
from pyattacker.run._stats import RunReport
from pyattacker.run._task import Task, task
from pyattacker.run._vendor import check_captured_clients

__all__ = [
    "DEFAULT_CODECS",
    "INPUT_FORMATS",
    "Codec",
    "CodecRegistry",
    "FieldKey",
    "FileSource",
    "InputChanged",
    "PipelineSpec",
    "PipelineSpecs",
    "PipelineTemplate",
    "RunReport",
    "Runner",
    "Shard",
    "Task",
    "check_captured_clients",
    "check_ray_address",
    "divide_pools",
    "fanout",
    "latest_input",
    "not_read",
    "pipeline",
    "range_rows",
    "read_rows",
    "register_codec",
    "resume_source",
    "shard_of",
    "shard_store_name",
    "task",
]
