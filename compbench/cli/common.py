"""What several commands share: the exit codes, the error line, loading the suite a command names, saying the
outcome, and turning the arguments of a command that trains into a session plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _err(msg: str) -> None:
    print(f"compbench: {msg}", file=sys.stderr)


def _load(args: argparse.Namespace, profile: str | None = None):  # -> LoadedSuite
    """Load the suite a command names and say which file it is (a bare name is a bundled suite)."""
    from compbench.suite import load_suite

    loaded = load_suite(args.suite, profile=profile)
    _say_loaded(loaded, profile)
    return loaded


def _say_loaded(loaded, profile: str | None, where: str | None = None) -> None:  # loaded: LoadedSuite
    """Say on stderr which suite file a command loaded (`where`: the bundle that carries it), and with which profile."""
    shown = f" with profile {profile!r}" if profile else ""
    origin = f"{where} (its suite file {Path(str(loaded.path)).name})" if where else loaded.path
    print(f"suite {loaded.name!r} from {origin}{shown}", file=sys.stderr)


def _print_outcome(outcome) -> None:  # outcome: compbench.outcome.SuiteOutcome
    """The outcome's problems on stderr, one line each (nothing when it passes)."""
    for line in outcome.problems():
        print(f"  {line}", file=sys.stderr)
    for line in outcome.warnings:
        print(f"  warning: {line}", file=sys.stderr)


def _plan(args: argparse.Namespace, loaded, **request: Any):  # (args, LoadedSuite, RunRequest fields) -> session.Plan
    """The plan of a command that trains (`run`, `check`, `baseline record`): its arguments as a RunRequest; the
    models it adds are said on stdout. A request compbench refuses raises RequestError (`compbench: ...`, exit 2)."""
    from compbench import session
    from compbench.suite import parse_model_args

    try:
        model_args = parse_model_args(args.model_args or "")
    except ValueError as exc:
        raise session.RequestError("model_args", str(exc), lead=False) from None
    tags = tuple(t.strip() for t in (args.model_tags or "").split(",") if t.strip())
    plan = session.plan(session.RunRequest(
        loaded, profile=args.profile, models=tuple(args.model) if args.model else None, model_args=model_args,
        tags=tags, seeds=args.seeds, device=args.device, threads=args.threads, progress=not args.quiet,
        command=args.command_line, **request))
    _say_added(plan, args.model_args)
    return plan


def _say_added(plan, model_args: str | None) -> None:  # plan: session.Plan
    """One line per model the plan added: its parameters (given, and the suite's added_networks) and its tasks."""
    given_args = plan.request.model_args or {}
    settings = plan.whole.suite.added_networks
    for given, model_id in plan.added.items():
        spec = next(m for m in plan.whole.models if m.id == model_id)
        from_suite = {k: v for k, v in spec.raw_params.items() if k in settings and k not in given_args}
        dropped = sorted(k for k in settings if k not in spec.raw_params) if "networks" in spec.tags else []
        shown = f"parameters {model_args}" if model_args else "its default parameters"
        if from_suite:
            shown += (" and" if model_args else ",") + " the suite's added_networks " + ",".join(f"{k}={v}" for k, v in from_suite.items())
        what = f"adapter {given!r}" if given == model_id else f"model {model_id!r} from {given}"
        print(f"adding {what} with {shown} on every task of {plan.whole.name} whose inputs it takes"
              + (f" (not {', '.join(dropped)}: its adapter does not take them)" if dropped else ""))



def _print_skipped(skipped: list[str], formats: tuple[str, ...], cached: bool = False) -> None:
    """Say which report writers were not run because their inputs hash to what they last wrote."""
    if not skipped:
        return
    n = len(skipped)
    why = "inputs identical, their digest cached" if cached else "inputs identical"  # cached: under the rows read
    what = f"{n} writer{'s' if n != 1 else ''} skipped ({', '.join(skipped)}; {why})"
    print(f"report unchanged: {what}" if n == len(formats) else f"report partly rewritten: {what}")
