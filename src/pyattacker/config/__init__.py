"""Config files for ``pyattacker run``: one YAML, TOML or JSON file instead of a Python
pipeline module.

:func:`load_config` reads a file, fills ``${VAR}`` from the environment, applies the
command line's overrides, checks every field (each ``ConfigError`` names its path, such as
``pipeline.tasks[2].retry.max_attempts``) and builds the run package's own objects
(``Pool``, ``Resource``, ``Task``, ``PipelineTemplate``): a config runs exactly as the
same pipeline written in Python. It opens nothing for writing; ``validate``, ``run -c``
and ``resume -c`` all go through it. Tasks are named by ``use:``: a built-in
(``pyattacker.tasks``) or ``module:attr``. See ``docs/run.md`` ("Config files").
"""

from pyattacker.config._build import SourceSpec
from pyattacker.config._fields import missing_fields
from pyattacker.config._load import LoadedConfig, load_config, render_effective
from pyattacker.config._read import SUFFIXES

__all__ = [
    "SUFFIXES",
    "LoadedConfig",
    "SourceSpec",
    "load_config",
    "missing_fields",
    "render_effective",
]
