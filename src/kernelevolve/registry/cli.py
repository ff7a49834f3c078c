"""`kernelevolve registry ...` and `kernelevolve promote`: the registry from the command line.

Plain aligned text (or JSON with `--json`); user mistakes are one line on stderr and exit 2
through the main CLI's `_user_errors`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import typer

from kernelevolve.registry.db import KernelRecord, Registry, default_registry
from kernelevolve.registry.schema import STATES

registry_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           pretty_exceptions_enable=False, rich_markup_mode=None,
                           context_settings={"help_option_names": ["-h", "--help"]},
                           help="Promoted kernels: list, show, promote, set-state, rollback, "
                                "stats, revalidate, import.")

REGISTRY_OPT = typer.Option(None, "--registry", metavar="DIR", show_default=False,
                            help="Registry folder (WORKSPACE/registry).")
WORKSPACE_OPT = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR",
                             show_default=False, help="Workspace holding the runs (./.kernelevolve).")
JSON_OPT = typer.Option(False, "--json", help="JSON output.")
WHY_OPT = typer.Option("", "--why", metavar="TEXT", help="Why (kept with the event).")


def _user_errors():
    from kernelevolve.cli_errors import user_errors as handler

    return handler()


def _open(registry: Optional[Path], workspace: Path, create: bool = False) -> Registry:
    return Registry.open(registry or default_registry(workspace), create=create)


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _speed(rec: KernelRecord) -> str:
    ev = rec.entry.get("evaluation", {})
    if ev.get("speedup") is None:
        return "-"
    ci = ev.get("interval") or [None, None]
    band = f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci[0] is not None else ""
    return f"{ev['speedup']:.3f}x{band}"


def _row(rec: KernelRecord) -> dict[str, Any]:
    prov = rec.entry.get("provenance", {})
    return {"name": rec.name, "version": rec.version, "state": rec.state,
            "language": rec.language, "platform": rec.platform,
            "speedup": rec.entry.get("evaluation", {}).get("speedup"),
            "interval": rec.entry.get("evaluation", {}).get("interval"),
            "run": prov.get("run"), "node": prov.get("node"), "created": rec.created}


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


@registry_app.command("list")
def list_cmd(registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
             as_json: bool = JSON_OPT) -> None:
    """Every version: name, version, state, language, speedup, where it came from."""
    with _user_errors(), _open(registry, workspace) as reg:
        recs = reg.all()
        if as_json:
            return _echo_json([_row(r) for r in recs])
        if not recs:
            typer.echo(f"no kernels in {reg.root} (kernelevolve promote RUN_ID)")
            return
        rows = [("NAME", "VERSION", "STATE", "LANGUAGE", "SPEEDUP (95%)", "FROM", "PROMOTED")]
        for r in recs:
            prov = r.entry.get("provenance", {})
            rows.append((r.name, f"v{r.version}", r.state, r.language, _speed(r),
                         f"{prov.get('run')} node {prov.get('node')}", _when(r.created)))
        _table(rows)


@registry_app.command("show")
def show_cmd(name: str = typer.Argument(..., metavar="NAME"),
             version: Optional[int] = typer.Option(None, "--version", metavar="N",
                                                   help="Which version (the newest)."),
             registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
             as_json: bool = JSON_OPT) -> None:
    """One version: region, evaluation, fingerprint, provenance, artifacts, and the events."""
    from kernelevolve.registry.region import Region

    with _user_errors(), _open(registry, workspace) as reg:
        rec = reg.get(name, version)
        events = [e for e in reg.events(name)]
        if as_json:
            return _echo_json({**_row(rec), "entry": rec.entry,
                               "events": [e.__dict__ for e in events]})
        e = rec.entry
        fp = e.get("fingerprint", {})
        typer.echo(f"{rec.label}: {rec.state}, {rec.language} on {rec.platform}, "
                   f"{_speed(rec)} over {e.get('evaluation', {}).get('baseline', 'eager')}")
        typer.echo(f"problem: {e['problem']['name']} ({e['problem']['path']}, "
                   f"sha256 {e['problem']['sha256'][:16]})")
        typer.echo("validated region:")
        for line in Region(e["region"]).lines():
            typer.echo(f"  {line}")
        typer.echo(f"  cases: {', '.join(e['region'].get('cases', []))}; varied: "
                   f"{', '.join(e['region'].get('varied', [])) or 'nothing'}")
        typer.echo(f"tolerance: {e.get('tolerance') or 'harness defaults per dtype'}")
        for c in e.get("evaluation", {}).get("cases", []):
            if c.get("ref_ms") and c.get("cand_ms"):
                typer.echo(f"  {c['name']}: {c['ref_ms']:.4f} ms eager -> {c['cand_ms']:.4f} ms")
        typer.echo(f"measured on: {fp.get('device')} ({fp.get('platform')}), torch "
                   f"{fp.get('torch')}, {fp.get('cxx')}")
        for lib in e.get("libraries", []):
            typer.echo(f"library: {lib['file']} sha256 {lib['sha256'][:16]} flags "
                       f"{' '.join(lib['flags']) or '-'}")
        prov = e.get("provenance", {})
        typer.echo(f"from: run {prov.get('run')} node {prov.get('node')} ({prov.get('operator')}"
                   f"{', ' + prov['model'] if prov.get('model') else ''}) in "
                   f"{prov.get('workspace')}")
        imp = prov.get("imported")
        if imp:
            typer.echo(f"imported: {imp.get('name')} v{imp.get('version')} "
                       f"({imp.get('state')} there), exported by "
                       f"{(imp.get('exported_by') or {}).get('who')}, from {imp.get('from')}")
        typer.echo("events:")
        for ev in events:
            move = f"{ev.from_state or '-'} -> {ev.to_state}" if ev.to_state else ""
            typer.echo(f"  {_when(ev.ts)}  v{ev.version}  {ev.kind:<11} {move:<20} {ev.who}: "
                       f"{ev.why}")


def promote_cmd(run_id: str = typer.Argument(..., metavar="RUN_ID",
                                             help="The run (`last`: the newest that "
                                                  "evaluated something)."),
                node: Optional[int] = typer.Option(None, "--node", metavar="N",
                                                   help="Node to promote (the run's verdict)."),
                name: Optional[str] = typer.Option(None, "--name", metavar="NAME",
                                                   help="Kernel name (the problem's)."),
                state: str = typer.Option("shadow", "--state", metavar="STATE",
                                          help="State to enter: shadow, canary, default "
                                               "(shadow)."),
                force: bool = typer.Option(False, "--force",
                                           help="Promote a node that is not a safe win."),
                why: str = WHY_OPT, registry: Optional[Path] = REGISTRY_OPT,
                workspace: Path = WORKSPACE_OPT, as_json: bool = JSON_OPT) -> None:
    """Record a run's accepted kernel in the registry (source, libraries, region, figures)."""
    from kernelevolve.registry.promote import promote
    from kernelevolve.store import Store

    with _user_errors():
        with Store.open(workspace) as store, _open(registry, workspace, create=True) as reg:
            rec = promote(store, reg, run_id, node=node, name=name, state=state, force=force,
                          why=why)
        if as_json:
            return _echo_json(_row(rec))
        prov = rec.entry["provenance"]
        typer.echo(f"promoted {rec.label} ({rec.state}): {_speed(rec)}, from run {prov['run']} "
                   f"node {prov['node']}; registry {reg.root}")


registry_app.command("promote")(promote_cmd)


@registry_app.command("set-state")
def set_state_cmd(name: str = typer.Argument(..., metavar="NAME"),
                  state: str = typer.Argument(..., metavar="STATE",
                                              help=f"One of {', '.join(STATES)}."),
                  version: Optional[int] = typer.Option(None, "--version", metavar="N",
                                                        help="Which version (the newest)."),
                  why: str = WHY_OPT, registry: Optional[Path] = REGISTRY_OPT,
                  workspace: Path = WORKSPACE_OPT, as_json: bool = JSON_OPT) -> None:
    """Move a version to a state; the version it displaces is retired as superseded."""
    with _user_errors(), _open(registry, workspace) as reg:
        rec = reg.set_state(name, version, state, why=why)
        if as_json:
            return _echo_json(_row(rec))
        typer.echo(f"{rec.label} is now {rec.state}")


@registry_app.command("rollback")
def rollback_cmd(name: str = typer.Argument(..., metavar="NAME"), why: str = WHY_OPT,
                 registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
                 as_json: bool = JSON_OPT) -> None:
    """Retire the default version and restore the one it replaced."""
    with _user_errors(), _open(registry, workspace) as reg:
        retired, restored = reg.rollback(name, why=why)
        if as_json:
            return _echo_json({"retired": _row(retired),
                               "restored": _row(restored) if restored else None})
        typer.echo(f"{retired.label} retired; " + (f"{restored.label} is the default again"
                                                   if restored else
                                                   f"{name} has no default now: calls run the "
                                                   "original module"))


@registry_app.command("stats")
def stats_cmd(name: Optional[str] = typer.Argument(None, metavar="[NAME]"),
              registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
              as_json: bool = JSON_OPT) -> None:
    """Coverage flushed by serving processes: calls served, fallbacks by reason, shadow."""
    with _user_errors(), _open(registry, workspace) as reg:
        if name is not None:
            reg.get(name)
        stats = reg.stats(name)
        if as_json:
            return _echo_json([{"name": n, "version": v, **c} for (n, v), c in stats.items()])
        if not stats:
            typer.echo("no coverage flushed yet (kernelevolve.registry.patching.flush())")
            return
        rows = [("NAME", "VERSION", "CALLS", "SERVED", "FALLBACKS", "SHADOW (MISMATCH)",
                 "SAVED ms")]
        for (n, v), c in stats.items():
            calls = c.get("calls", 0)
            served = c.get("served", 0)
            fb = ", ".join(f"{k} {x}" for k, x in sorted(c.get("fallbacks", {}).items()) if x)
            sh = c.get("shadow", {})
            rows.append((n, f"v{v}", str(calls), f"{served} ({served / calls:.0%})" if calls
                         else "0", fb or "-", f"{sh.get('calls', 0)} ({sh.get('mismatches', 0)})",
                         f"{c.get('time_saved_ms', 0.0):.1f}"))
        _table(rows)


@registry_app.command("revalidate")
def revalidate_cmd(names: Optional[list[str]] = typer.Argument(None, metavar="[NAME]..."),
                   registry: Optional[Path] = REGISTRY_OPT, workspace: Path = WORKSPACE_OPT,
                   as_json: bool = JSON_OPT) -> None:
    """Re-run the full gates of each serving version here (rebuilt from source); demote what
    fails or no longer beats its baseline; report compiler and hardware drift."""
    from kernelevolve.registry.revalidate import revalidate

    with _user_errors(), _open(registry, workspace) as reg:
        say = (lambda m: None) if as_json else (lambda m: typer.echo(m, err=True))
        reports = revalidate(reg, list(names or []) or None, progress=say)
        if as_json:
            return _echo_json(reports)
        for r in reports:
            typer.echo(f"{r['name']} v{r['version']} ({r['state']}): {r['verdict']}: {r['why']}"
                       + (" [the problem changed since promotion]" if r["problem_changed"]
                          else ""))
            for lib in r["drift"]["compiler"]:
                same = "same binary" if lib["same_binary"] else (
                    f"rebuilt binary differs ({lib['compiler_then']} -> {lib['compiler_now']}; "
                    f"old binary loads: {lib.get('old_binary_loads', '?')}; registered binary "
                    f"{lib.get('registered_binary', {}).get('why', 'not run')})")
                typer.echo(f"  compiler drift, {lib['file']}: {same}")
            hw = r["drift"]["hardware"]
            typer.echo("  hardware drift: " + ("none" if not hw else "; ".join(
                f"{k}: {v[0]} -> {v[1]}" if isinstance(v, list) and len(v) == 2 and k !=
                "cpu_flags_lost" else f"{k}: {v}" for k, v in hw.items())))
        if not reports:
            typer.echo("nothing to revalidate (no version in default, canary or shadow)")
