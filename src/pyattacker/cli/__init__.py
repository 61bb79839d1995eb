"""The command line: a thin shell over the library.

``main`` is the one error boundary: our exceptions become a one-line message on stderr and
their ``exit_code`` (2 for bad input), Ctrl-C becomes 130, usage mistakes 2. Only a bug of
ours prints a traceback (exit 1), and says so.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

import click

from pyattacker.cli._app import cli
from pyattacker.errors import ConfigError, PyAttackerError

__all__ = ["cli", "main", "run_cli"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="pyattacker", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except PyAttackerError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except Exception:
        traceback.print_exc()
        click.echo("pyattacker: this is a bug in pyattacker; please report it", err=True)
        return EXIT_FAILED
    return result if isinstance(result, int) else EXIT_OK


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_cli())
