"""The ``driftloop`` command line.

Commands are loaded lazily (``COMMANDS`` maps a name to the module that defines it) so that
``driftloop --help`` and the exporter do not pay for importing torch, mlflow or evidently.
Each command module exposes ``command``, a :class:`click.Command`, and reads its configuration
through :func:`config_from`.
"""
from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

from monitor.config import DriftloopConfig, load_config
from monitor.errors import DriftloopError
from monitor.logs import setup_logging

# name -> (module, one-line help shown by `driftloop --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("monitor.commands.serve", "Run the daemon: ingestion API, /metrics, drift job, alerts, retraining."),
    "exporter": ("monitor.commands.exporter", "Run the GPU exporter alone (NVML, or --simulate N)."),
    "init": ("monitor.commands.init", "Write a commented driftloop.yaml for your data file (feature types inferred)."),
    "train": ("monitor.commands.train", "Train the baseline model from a CSV/Parquet file and register it."),
    "retrain": ("monitor.commands.retrain", "Run one incremental retrain now on the recent labelled window."),
    "check": ("monitor.commands.check", "Run the drift and performance job once and print the result."),
    "status": ("monitor.commands.status", "Show champion, last window's metrics, incidents and retrains."),
    "export": ("monitor.commands.export", "Write a registered version's ONNX (or INT8 ONNX) model and manifest."),
    "export-samples": ("monitor.commands.export_samples", "Write the rows behind an embedding drift for labelling."),
    "baseline-constraints": ("monitor.commands.constraints", "Write the constraints file suggested from the "
                             "champion's baseline (types, completeness, ranges, categories)."),
    "rollback": ("monitor.commands.rollback", "Move the champion alias back to the previous version."),
    "demo": ("monitor.commands.demo", "The whole loop end to end on embedded defaults (CPU, minutes)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[name][0])
        return _with_global_options(module.command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_) for name, (_, help_) in COMMANDS.items()])


class _State:
    def __init__(self, config_path: str | None, log_level: str | None, model: str | None = None):
        self.config_path = config_path
        self.log_level = log_level
        self.model = model


_CONFIG_HELP = "YAML config file [default: $DRIFTLOOP_CONFIG or ./driftloop.yaml if present]."
_LEVELS = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)
_MODEL_HELP = ("The model to act on, by name, in a configuration of several (models: or models_dir:) "
               "[default: the only model].")


def _set_state(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A global option given after the subcommand (``driftloop serve --config x.yaml``)."""
    state = ctx.find_object(_State)
    if value is None or state is None:
        return
    if param.name == "config_path":
        state.config_path = value
    elif param.name == "model":
        state.model = value
    else:
        state.log_level = value.upper()


def _with_global_options(command: click.Command) -> click.Command:
    """``command`` also accepting ``--config``/``-c`` and ``--log-level`` (added once per command object)."""
    if not any(p.name == "config_path" for p in command.params):
        command.params += [
            click.Option(["--config", "-c", "config_path"], type=click.Path(dir_okay=False), default=None,
                         expose_value=False, is_eager=True, callback=_set_state, help=_CONFIG_HELP),
            click.Option(["--log-level"], type=_LEVELS, default=None, expose_value=False, is_eager=True,
                         callback=_set_state, help="Override logging.level."),
        ]
    if not any(p.name == "model" for p in command.params):
        command.params.append(click.Option(["--model", "model"], default=None, metavar="NAME", expose_value=False,
                                           is_eager=True, callback=_set_state, help=_MODEL_HELP))
    return command


def log_level_given(ctx: click.Context) -> bool:
    """Whether ``--log-level`` was given (before or after the subcommand)."""
    state = ctx.find_object(_State)
    return bool(state and state.log_level)


def config_from(ctx: click.Context, overrides: dict[str, Any] | None = None, *,
                whole: bool = False) -> DriftloopConfig:
    """Load and validate the configuration once, with CLI flag ``overrides`` on top, and set up logging.

    The configuration of the model ``--model`` names (or of the only model; ConfigError when there
    are several and none is named); ``whole``: the deployment's, every model in
    :meth:`~monitor.config.DriftloopConfig.model_configs` (``serve``, ``status``)."""
    state: _State | None = ctx.find_object(_State)
    overrides = {k: v for k, v in (overrides or {}).items() if v not in (None, {})}
    cfg = load_config(state.config_path if state else None, overrides=overrides)
    setup_logging(state.log_level if state and state.log_level else cfg.logging.level, cfg.logging.format)
    if whole:
        return cfg.for_model(state.model) if state and state.model else cfg
    return cfg.for_model(state.model if state else None)


def chosen_model(ctx: click.Context) -> str | None:
    """The model ``--model`` names, if any."""
    state = ctx.find_object(_State)
    return state.model if state else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False), default=None, help=_CONFIG_HELP)
@click.option("--log-level", type=_LEVELS, default=None, help="Override logging.level.")
@click.option("--model", "model", default=None, metavar="NAME", help=_MODEL_HELP)
@click.version_option(package_name="driftloop")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str | None, model: str | None) -> None:
    """driftloop: watch a deployed model and the GPUs it trains on, and fix the model when it degrades."""
    ctx.obj = _State(config_path, log_level.upper() if log_level else None, model)


def main(argv: list[str] | None = None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="driftloop", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except DriftloopError as exc:
        click.echo(f"Error: {exc}", err=True)
        return 2
    except OSError as exc:  # a path the system refused: a missing folder, /proc, a file where a folder goes
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"Error: {where}{exc.strerror or exc}", err=True)
        return 2
    except KeyboardInterrupt:
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    # `python -m monitor.cli` runs this file as __main__, a second copy of the module: call the
    # real one so that its _State class is the one commands look up.
    from monitor.cli import main as _main
    logging.captureWarnings(True)
    sys.exit(_main())
