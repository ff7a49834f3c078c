"""`kernelevolve export`, `kernelevolve verify` and `kernelevolve registry import`.

Registered by the top-level cli.py (this package sits above registry/ in the layer order, so
registry/cli.py cannot import it). Exit codes as the rest of the CLI: 0 done or passed, 1 the
kernel was refused (verify, like `eval` for a rejected candidate), 2 a user mistake (one line on
stderr).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from kernelevolve.registry.cli import JSON_OPT, REGISTRY_OPT, WORKSPACE_OPT


def _user_errors():
    from kernelevolve.cli_errors import user_errors as handler

    return handler()


def _open(registry: Optional[Path], workspace: Path, create: bool = False) -> Any:
    from kernelevolve.registry.db import Registry, default_registry

    return Registry.open(registry or default_registry(workspace), create=create)


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def export_cmd(target: str = typer.Argument(..., metavar="NAME[@VERSION]",
                                            help="A registered kernel (its newest version)."),
               out: Path = typer.Option(..., "--out", metavar="DIR",
                                        help="New (or empty) folder to write."),
               layer: Optional[str] = typer.Option(None, "--layer", metavar="CLASS",
                                                   help="Layer class name (from NAME)."),
               registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
               as_json: bool = JSON_OPT) -> None:
    """Write a registered kernel as a Hugging Face kernels repository, evidence inside."""
    from kernelevolve.share.export import export

    with _user_errors(), _open(registry, workspace) as reg:
        done = export(reg, target, out, layer=layer)
    if as_json:
        return _echo_json(done)
    typer.echo(f"exported {done['name']} v{done['version']} to {done['out']}: build "
               f"{done['build']}, layer {done['layer']}")
    typer.echo(f"  {done['headline']}")
    typer.echo(f"  check it where it will run: kernelevolve verify {done['out']}")


def verify_cmd(folder: Path = typer.Argument(..., metavar="DIR",
                                             help="An exported kernel (kernelevolve export)."),
               as_json: bool = JSON_OPT) -> None:
    """The load-time gate here: variant, files, machine, full gates, timing against the
    recorded figure. Exit 0 passed, 1 refused, 2 not an exported kernel."""
    from kernelevolve.share.verify import verify

    from kernelevolve.cli_errors import err_console
    from kernelevolve.report.steps import Steps

    with _user_errors(), Steps(err_console, "checking the files and the machine",
                               prefix="verify: ", quiet=as_json) as steps:
        report = verify(folder, progress=steps.update)
    if as_json:
        _echo_json(report)
    else:
        typer.echo(f"{report.get('kernel', folder)}: {'passed' if report['ok'] else 'REFUSED'}"
                   + (f" (build {report['build']})" if report.get("build") else ""))
        for c in report["checks"]:
            typer.echo(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']:<8} {c['why']}")
        typer.echo(f"  timing rule: {report['rule']}")
    if not report["ok"]:
        raise typer.Exit(1)


def import_cmd(folder: Path = typer.Argument(..., metavar="DIR",
                                             help="An exported kernel (kernelevolve export)."),
               name: Optional[str] = typer.Option(None, "--name", metavar="NAME",
                                                  help="Register under this name (the "
                                                       "exported one)."),
               registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
               as_json: bool = JSON_OPT) -> None:
    """Verify an exported kernel here and register it as a new version in shadow."""
    from kernelevolve.share.importer import import_dir

    with _user_errors(), _open(registry, workspace, create=True) as reg:
        rec, report = import_dir(reg, folder, name=name)
    if as_json:
        return _echo_json({"name": rec.name, "version": rec.version, "state": rec.state,
                           "verify": report})
    typer.echo(f"imported {rec.label} ({rec.state}) from {folder}: "
               f"{report['checks'][-1]['why']}")
    typer.echo(f"  serve it: kernelevolve registry set-state {rec.name} default "
               f"--version {rec.version}")
