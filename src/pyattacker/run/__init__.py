"""The run job: tasks, pipelines, the Runner and its durable record.

A *task* is a unary function (sync or async, ``(value)`` or ``(value, ctx)``); a *pipeline*
is a chain of tasks over one seed; the ``Runner`` runs many pipelines across pools of
endpoints, checkpoints every task's output to a store, and resumes after anything dies.
See ``docs/run.md``.
"""

from pyattacker.run._codecs import Codec, CodecRegistry, register_codec
from pyattacker.run._fanout import fanout
from pyattacker.run._pipeline import PipelineSpec, PipelineSpecs, PipelineTemplate, pipeline
from pyattacker.run._runner import Runner
from pyattacker.run._sources import FileSource, read_rows
from pyattacker.run._stats import RunReport
from pyattacker.run._task import Task, task

__all__ = [
    "Codec",
    "CodecRegistry",
    "FileSource",
    "PipelineSpec",
    "PipelineSpecs",
    "PipelineTemplate",
    "RunReport",
    "Runner",
    "Task",
    "fanout",
    "pipeline",
    "read_rows",
    "register_codec",
    "task",
]
