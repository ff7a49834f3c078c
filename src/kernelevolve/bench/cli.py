"""`kernelevolve bench PATH...` or `--suite aten`: problems as one resumable campaign.

Prints one line per problem as it finishes, then the table and the suite's figures; writes
WORKSPACE/benches/NAME.json (the state, updated after every problem) and NAME.html. Ctrl-C or
SIGTERM stops it (exit 130); the same command again resumes where it stopped.

`--suite aten` generates the shipped ATen-operator probes (bench/aten_suite.py) into
WORKSPACE/suites/aten-PROFILE (or --suite-dir) and evaluates the synthesizer's draft of each
(`--draft`, bench/draft.py; `--search` optimizes each instead); it prints the operator x
platform matrix of every aten campaign in the workspace (bench/matrix.py) and writes it to
benches/aten-matrix.json and .html.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from kernelevolve.interrupts import stop_signals
from kernelevolve.cli_options import (OPT_EXECUTOR, OPT_LLM_API_KEY_ENV, OPT_LLM_BASE_URL,
                                       OPT_RAY_ADDRESS)


def _user_errors():
    from kernelevolve.cli_errors import user_errors as handler

    return handler()


# bench_cmd's options
BENCH_PATHS = typer.Argument(None, metavar="PATH",
                             help="Problem files, or folders of them.")
BENCH_SUITE = typer.Option(None, "--suite", metavar="NAME",
                           help="A shipped suite instead of PATHs: aten.")
BENCH_PROBES = typer.Option(None, "--probes", metavar="PATTERN",
                            help="With --suite: only probes whose name or "
                                 "operator matches (globs, comma-separated).")
BENCH_PROFILE = typer.Option(None, "--profile", metavar="SIZE",
                             help="With --suite: small, medium or large shapes "
                                  "(small for an interpreted language, medium on cpu, "
                                  "large on devices).")
BENCH_SUITE_DIR = typer.Option(None, "--suite-dir", metavar="DIR",
                               help="With --suite: where the problems are "
                                    "written (WORKSPACE/suites/aten-SIZE).")
BENCH_LANGUAGE = typer.Option(None, "--language", metavar="LANG",
                              help="The draft's language, one the synthesizer "
                                   "writes (the platform's default language).")
BENCH_DRAFT = typer.Option(None, "--draft/--search",
                           help="Evaluate the synthesizer's draft once per "
                                "problem, or optimize each (default: --draft "
                                "with --suite, --search without).")
BENCH_NAME = typer.Option(None, "--name", metavar="NAME",
                          help="Campaign name (derived from the problem list); "
                               "the same name resumes it.")
BENCH_WORKSPACE = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR",
                               show_default=False, help="Workspace (./.kernelevolve).")
BENCH_MAX_EVALS = typer.Option(6, "--max-evals", metavar="N",
                               help="Evaluations per problem (6).")
BENCH_MAX_TIME = typer.Option(None, "--max-time", metavar="SECONDS",
                              help="Search time per problem (none).")
BENCH_TOTAL_TIME = typer.Option(None, "--total-time", metavar="SECONDS",
                                help="Stop starting problems after this long "
                                     "(none); the rest stay pending.")
BENCH_OPERATOR = typer.Option(None, "--operator", metavar="NAME",
                              help="Operators, as for optimize (synth, "
                                   "tune; with --llm: llm, tune).")
BENCH_PLATFORM = typer.Option(None, "--platform", metavar="NAME",
                              help="A registered platform, see `kernelevolve "
                                   "targets` (cpu).")
BENCH_WORKERS = typer.Option(None, "--workers", metavar="N",
                             help="Evaluation slots per problem (1).")
BENCH_LLM = typer.Option(None, "--llm", metavar="PROVIDER:MODEL",
                         help="The model (none: the built-in synthesizer).")
BENCH_COMPILE_BASELINE = typer.Option(
    None, "--compile/--no-compile", help="Time torch.compile once per problem, for fast_p "
                                         "over it (one inductor compile per case; on with --search, off with --draft).")
BENCH_JSON_PATH = typer.Option(None, "--json", metavar="PATH",
                               help="Also write the rows and figures here.")
BENCH_HTML_PATH = typer.Option(None, "--html", metavar="PATH",
                               help="Also write the HTML report here.")


def bench_cmd(
    paths: Optional[list[Path]] = BENCH_PATHS,
    suite: Optional[str] = BENCH_SUITE,
    probes: Optional[list[str]] = BENCH_PROBES,
    profile: Optional[str] = BENCH_PROFILE,
    suite_dir: Optional[Path] = BENCH_SUITE_DIR,
    language: Optional[str] = BENCH_LANGUAGE,
    draft: Optional[bool] = BENCH_DRAFT,
    name: Optional[str] = BENCH_NAME,
    workspace: Path = BENCH_WORKSPACE,
    max_evals: int = BENCH_MAX_EVALS,
    max_time: Optional[float] = BENCH_MAX_TIME,
    total_time: Optional[float] = BENCH_TOTAL_TIME,
    operator: Optional[list[str]] = BENCH_OPERATOR,
    platform: Optional[str] = BENCH_PLATFORM,
    workers: Optional[int] = BENCH_WORKERS,
    executor: Optional[str] = OPT_EXECUTOR,
    ray_address: Optional[str] = OPT_RAY_ADDRESS,
    llm: Optional[str] = BENCH_LLM,
    llm_base_url: Optional[str] = OPT_LLM_BASE_URL,
    llm_api_key_env: Optional[str] = OPT_LLM_API_KEY_ENV,
    compile_baseline: Optional[bool] = BENCH_COMPILE_BASELINE,
    json_path: Optional[Path] = BENCH_JSON_PATH,
    html_path: Optional[Path] = BENCH_HTML_PATH,
) -> None:
    """Optimize every problem of a folder in turn (resumable), then report fast_p over eager
    and over torch.compile, the correctness rate and the search cost. With --suite aten:
    the shipped ATen-operator probes, each synthesizer draft evaluated once, and the
    operator x platform matrix."""
    given = dict(locals())  # the arguments only: nothing else is bound yet
    from kernelevolve.config import build_config

    with _user_errors():
        draft = bool(suite) if draft is None else draft
        flags = _bench_flags(given, draft)
        cfg = build_config(None, flags)  # a bad flag is one line now, not at the first problem
        language = _language(language, cfg.platform, draft)
        problems, meta, default = _problems(paths, suite, probes, profile, suite_dir,
                                            Path(workspace), cfg.platform, language, draft)
        camp, flags = _open_campaign(Path(workspace), name or default, problems, flags,
                                     {"mode": "draft" if draft else "search",
                                      "language": language}, meta)
        _run(camp, Path(workspace), flags, total_time)
        _report(camp, Path(workspace), json_path, html_path)


_BENCH_FLAGS = ("max_evals", "max_time", "platform", "workers", "executor", "ray_address", "llm",
                "llm_base_url", "llm_api_key_env")


def _bench_flags(given: dict[str, Any], draft: bool) -> dict[str, Any]:
    """The run settings every problem's search gets (None: not given)."""
    flags = {k: given[k] for k in _BENCH_FLAGS}
    flags["operators"] = given["operator"]
    compile_baseline = given["compile_baseline"]
    timed = (not draft) if compile_baseline is None else compile_baseline
    flags.update(time_compile=timed, compile_figures=timed)
    return {k: v for k, v in flags.items() if v is not None}


def _open_campaign(workspace: Path, name: str, problems: list[Path], flags: dict[str, Any],
                   data: dict[str, Any], meta: dict[str, Any] | None) -> tuple[Any, dict]:
    """(campaign, its settings): a new one with `data` and the suite's metadata, or the
    stored one of that name resumed with its own settings."""
    from kernelevolve.bench.campaign import Campaign
    from kernelevolve.cli_errors import err_console

    camp, resumed = Campaign.open(workspace, name, problems, flags)
    if resumed:
        done = sum(1 for r in camp.rows if r["status"] in ("done", "skipped", "failed"))
        err_console.print(f"resuming bench {camp.name}: {done} of {len(camp.rows)} "
                          "problems finished", highlight=False)
        return camp, camp.data["settings"]
    camp.data.update(data)
    if meta:
        camp.data["suite"] = {k: v for k, v in meta.items() if k != "ops"}
        for row in camp.rows:
            row["op"] = meta["ops"].get(row["problem"])
    camp.save()
    return camp, flags


def _language(language: Optional[str], platform: str, draft: bool) -> str:
    from kernelevolve.errors import UsageError
    from kernelevolve.synth.api import languages
    from kernelevolve.target import as_target

    default = as_target(platform).platform.default_language
    if language is None:
        return default
    if language not in languages():
        raise UsageError(f"--language {language!r}: the synthesizer writes "
                         f"{' or '.join(languages())}")
    if not draft and language != default:
        raise UsageError(f"--language {language} with --search: the search drafts "
                         f"{default} on {platform}; use --draft for {language}")
    return language


def _problems(paths, suite, patterns, profile, suite_dir, workspace: Path, platform: str,
              language: str, draft: bool) -> tuple[list[Path], dict[str, Any] | None, str]:
    """(problem paths, the suite's metadata or None, the default campaign name)."""
    from kernelevolve.bench.campaign import default_name
    from kernelevolve.bench.suite import find_problems
    from kernelevolve.errors import UsageError

    if suite is None:
        given = [f for f, v in (("--probes", patterns), ("--profile", profile),
                                ("--suite-dir", suite_dir)) if v]
        if given:
            raise UsageError(f"{', '.join(given)} need(s) --suite aten")
        if not paths:
            raise UsageError("pass problem files or folders (PATH...), or --suite aten")
        problems = find_problems(list(paths))
        return problems, None, default_name(problems)
    if suite != "aten":
        raise UsageError(f"--suite {suite!r}: unknown suite; the shipped one is aten")
    if paths:
        raise UsageError("pass problem PATHs or --suite, not both")
    from kernelevolve.bench.aten_suite import ops_of, select, selection_tag, write_suite
    from kernelevolve.target import as_target

    if profile is None:
        plat = as_target(platform).platform  # interpreted: small; else as the platform says
        profile = "small" if language in plat.interpreted_languages else plat.bench_profile
    chosen = select(patterns)
    folder = suite_dir or workspace / "suites" / f"aten-{profile}"
    problems = write_suite(folder, profile, chosen)
    tag = selection_tag(chosen)
    name = f"aten-{profile}-{platform}-{language}" + (f"-{tag}" if tag else "") + \
        ("" if draft else "-search")
    meta = {"name": "aten", "profile": profile, "platform": platform, "language": language,
            "ops": ops_of(chosen)}
    return problems, meta, name


def _run(camp: Any, workspace: Path, flags: dict[str, Any], total_time: float | None) -> None:
    from kernelevolve.bench.draft import run_drafts
    from kernelevolve.bench.runner import run_campaign
    from kernelevolve.cli_errors import err_console

    total = len(camp.rows)
    drafting = camp.data.get("mode") == "draft"
    language = camp.data.get("language") or "the default language"

    def say(event: str, row: dict[str, Any]) -> None:
        i = camp.rows.index(row) + 1
        if event == "start":
            what = f"drafting ({language})" if drafting else f"searching (run {row['run_id']})"
            err_console.print(f"[{i}/{total}] {row['problem']}: {what}", highlight=False,
                              soft_wrap=True, markup=False)
        elif event.startswith("progress "):  # evaluations, finalists (runner.RowProgress)
            err_console.print(f"[{i}/{total}] {row['problem']}: {event[9:]}", highlight=False,
                              soft_wrap=True, markup=False)
        elif event in ("done", "skipped", "failed"):
            what = _done_text(row, drafting) if event == "done" else \
                f"{event}: {row.get('reason')}"
            err_console.print(f"[{i}/{total}] {row['problem']}: {what}", highlight=False,
                              soft_wrap=True, markup=False)

    with stop_signals():  # SIGTERM and Ctrl-C stop the same way, never lost
        try:
            if drafting:
                run_drafts(camp, flags, language, total_time=total_time, say=say)
            else:
                run_campaign(camp, workspace, flags, total_time=total_time, say=say)
        except KeyboardInterrupt:
            camp.save()
            err_console.print(f"interrupted; finished problems are kept; run the same command to "
                              f"resume bench {camp.name}", highlight=False, soft_wrap=True)
            raise typer.Exit(130)


def _done_text(row: dict[str, Any], drafting: bool) -> str:
    if not drafting:
        return str(row.get("message"))
    verdict = row.get("verdict")
    if verdict == "correct":
        s = row.get("measured_speedup")
        return "correct" + (f", {s:.2f}x over eager" if s else " (not timed)")
    return f"{str(verdict).replace('_', ' ')}: {row.get('reason')}"


def _report(camp: Any, workspace: Path, json_path: Optional[Path],
            html_path: Optional[Path]) -> None:
    from kernelevolve.bench.metrics import summary
    from kernelevolve.bench.report import html_page, summary_lines, table_rows

    rows = camp.rows
    s = summary(rows)
    matrix = None
    if camp.data.get("suite"):
        from kernelevolve.bench.matrix import build, collect, html_section, print_matrix

        matrix = build(collect(workspace, camp.data["suite"]["name"]))
        print_matrix(matrix)
    else:
        table = table_rows(rows)
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        for row in table:
            typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    for line in summary_lines(s):
        typer.echo(line)
    if camp.data.get("stopped"):
        typer.echo(f"stopped: {camp.data['stopped']}; run the same command to go on")
    page = html_page(camp.data, s, extra=html_section(matrix) if matrix else "")
    out = {"name": camp.name, "rows": rows, "summary": s, "stopped": camp.data.get("stopped")}
    if matrix:
        out["matrix"] = matrix
        base = camp.path.parent / f"{camp.data['suite']['name']}-matrix"
        base.with_suffix(".json").write_text(json.dumps(matrix, indent=1, default=str))
        base.with_suffix(".html").write_text(html_page(
            {"name": base.name, "rows": []}, None, extra=html_section(matrix)))
    camp.path.with_suffix(".html").write_text(page)
    if html_path:
        html_path.write_text(page)
    if json_path:
        json_path.write_text(json.dumps(out, indent=2, default=str))
    typer.echo(f"state: {camp.path}; report: {camp.path.with_suffix('.html')}")

