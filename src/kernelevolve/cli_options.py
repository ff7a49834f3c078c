"""The command line's shared options: `eval`'s and `optimize`'s, and those `bench` takes with
the same meaning (executor, Ray address, LLM server and key), declared once as typer defaults.
"""
from __future__ import annotations

from pathlib import Path

import typer

from kernelevolve.search.termination import DEFAULT_MAX_EVALS

HELP_SETTINGS = {"help_option_names": ["-h", "--help"]}  # -h everywhere, as --help

ALLOW_NO_KERNEL_OPT = typer.Option(False, "--allow-no-kernel",
                                   help="Accept candidates that launch no custom kernel.")
STRICT_OPT = typer.Option(False, "--strict",
                          help="Reject any ATen compute op inside the candidate's forward.")
STAGE_TIMEOUT_OPT = typer.Option(
    None, "--stage-timeout", metavar="SECONDS",
    help="Time limit of each candidate stage (load, run, timing); default: 300/120/600 s "
         "scaled by the machine's load, x4 under the Triton interpreter.")
QUIET_OPT = typer.Option(False, "--quiet", "-q", help="No progress; only the outcome at the end.")
JSON_LINES_OPT = typer.Option(False, "--json-lines",
                              help="Progress and outcome as one JSON object per line.")


# eval_cmd's options
EVAL_PROBLEM = typer.Argument(..., metavar="PROBLEM",
                              help="Problem module (KernelBench format).")
EVAL_CANDIDATE = typer.Argument(..., metavar="CANDIDATE",
                                help="Candidate module (.py) defining ModelNew.")
EVAL_PLATFORM = typer.Option("cpu", metavar="NAME", show_default=False,
                             help="A registered platform; `kernelevolve targets` "
                                  "lists them (cpu).")
EVAL_JSON_PATH = typer.Option(None, "--json", metavar="PATH",
                              help="Write the full result here.")
EVAL_TRIALS = typer.Option(3, metavar="N", show_default=False,
                           help="Correctness trials per case, fresh inputs each (3, at least 3).")
EVAL_SEED = typer.Option(None, metavar="N",
                         help="Seed for input generation (fresh each time).")
EVAL_BASELINE = typer.Option("eager", metavar="NAME", show_default=False,
                             help="eager, or compile to also time torch.compile (eager).")
EVAL_SANDBOX = typer.Option(None, metavar="MODE",
                            help="auto, bwrap, unshare or none (auto).")
EVAL_TIMING_CAP = typer.Option(3.0, "--timing-cap", metavar="SECONDS", show_default=False,
                               help="Most seconds to time one case (3): past the minimums, a "
                                    "busy machine is timed until the case's 95% interval is "
                                    "within 1.2 (hi/lo) or this cap; the output says which.")
EVAL_PROFILE = typer.Option(False, "--profile",
                            help="Also print each case's profile (CPU time, page faults, "
                                 "context switches, perf counters), read from outside the "
                                 "candidate's process; --json always has it.")


ID_HELP = "Run id, a unique prefix, or last (the newest run that evaluated something)."
WORKSPACE_OPT = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR",
                             show_default=False,
                             help="Workspace directory holding runs (./.kernelevolve).")


# optimize's options
OPT_PROBLEM = typer.Argument(..., metavar="PROBLEM",
                             help="Problem module (KernelBench format).")
OPT_SEED_CANDIDATE = typer.Option(
    None, "--seed-candidate", metavar="FILE", help="Starting candidate (repeatable).")
OPT_CONFIG_FILE = typer.Option(None, "--config", metavar="FILE",
                               help="Run config file (TOML); flags override it.")
OPT_PLATFORM = typer.Option(None, metavar="NAME",
                            help="A registered platform; `kernelevolve targets` "
                                 "lists them (cpu).")
OPT_OPERATOR = typer.Option(
    None, "--operator", metavar="NAME",
    help="Operator (repeatable): synth, tune, llm (synth and tune; with --llm: llm and "
         "tune).")
OPT_POLICY = typer.Option(None, metavar="NAME",
                          help="Selection policy: ucb, beam, greedy, random (ucb).")
OPT_MAX_EVALS = typer.Option(None, "--max-evals", metavar="N",
                             help=f"Evaluation budget ({DEFAULT_MAX_EVALS}).")
OPT_MAX_TIME = typer.Option(None, "--max-time", metavar="SECONDS",
                            help="Wall-time budget (none).")
OPT_MAX_COST = typer.Option(None, "--max-cost", metavar="DOLLARS",
                            help="LLM budget (none).")
OPT_MAX_TOKENS = typer.Option(None, "--max-tokens", metavar="N",
                              help="LLM budget in tokens (none).")
OPT_TARGET = typer.Option(None, "--target", metavar="SPEEDUP",
                          help="Stop once this speedup is reached (none).")
OPT_STOP_AT_SOL = typer.Option(
    None, "--stop-at-sol", metavar="FRACTION",
    help="Stop once the best kernel reaches this fraction of the machine's speed of light, "
         "e.g. 0.6 (none).")
OPT_BASELINE = typer.Option(
    None, "--baseline", metavar="NAME",
    help="What fitness is relative to: eager or compile (torch.compile of the reference, "
         "timed in every evaluation) (eager).")
OPT_COMPILE_FIGURES = typer.Option(
    None, "--compile-figures/--no-compile-figures",
    help="With --baseline eager and an LLM: time torch.compile once, in the first "
         "evaluation, for the prompts (on; off saves one inductor compile per case).")
OPT_WORKERS = typer.Option(None, metavar="N",
                           help="Evaluation slots: local workers (1), or Ray "
                                "actors (the cluster's).")
OPT_EXECUTOR = typer.Option(None, "--executor", metavar="NAME",
                            help="Where evaluations run: local or ray (local).")
OPT_RAY_ADDRESS = typer.Option(None, "--ray-address", metavar="HOST:PORT",
                               help="Ray cluster (a private one on 127.0.0.1).")
OPT_SEED = typer.Option(None, metavar="N",
                        help="Seed for the search's random choices (0).")
OPT_LLM = typer.Option(None, "--llm", metavar="PROVIDER:MODEL",
                       help="The model, e.g. openai:gpt-5 (none: no LLM).")
OPT_LLM_BASE_URL = typer.Option(None, "--llm-base-url", metavar="URL",
                                help="OpenAI-compatible server (vLLM, Ollama...).")
OPT_LLM_API_KEY_ENV = typer.Option(
    None, "--llm-api-key-env", metavar="VAR",
    help="Variable holding the API key (OPENAI_API_KEY or ANTHROPIC_API_KEY).")
OPT_LLM_TIMEOUT = typer.Option(
    None, "--llm-timeout", metavar="SECONDS",
    help="Give up on an LLM request after this long with nothing received; replies are "
         "streamed, so a slow model that keeps writing is never cut off (600).")
OPT_LLM_MAX_FAILURES = typer.Option(
    None, "--llm-max-failures", metavar="N",
    help="Stop the run after this many failed LLM calls in a row (4).")
OPT_AGENT = typer.Option(False, "--agent",
                         help="Let the LLM compile, check, time and profile candidates "
                              "(one case, sandboxed, not counted) before it submits.")
OPT_AGENT_TURNS = typer.Option(None, "--agent-turns", metavar="N",
                               help="Model calls per proposal with --agent (6).")
OPT_LANGUAGE = typer.Option(None, metavar="NAME",
                            help="Language the LLM writes, one the platform "
                                 "runs (the platform's default language).")
OPT_NOTES = typer.Option(None, "--notes", metavar="DIR",
                         help="Extra folder of knowledge notes (repeatable).")
OPT_JSON_PATH = typer.Option(None, "--json", metavar="PATH",
                             help="Write the run summary here.")
