"""The `compbench` command: run, report, check, baseline, compare, history, bundle, site, list, show, validate."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from compbench.cli.argtypes import int_in, positive_float, positive_int, seed_int, unit_interval
from compbench.cli.catalog import cmd_list, cmd_show, cmd_validate
from compbench.cli.check import cmd_baseline_record, cmd_check
from compbench.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from compbench.cli.results import HISTORY_FORMATS, cmd_bundle, cmd_compare, cmd_history, cmd_site
from compbench.cli.run import cmd_report, cmd_run


DEFAULT_FORMATS = ("md", "csv", "html", "png", "predictions")  # = compbench.report.writers.DEFAULT_FORMATS (no import at parse time)


def _limit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-cells", type=positive_int, metavar="N", help="allow tasks of up to N cells (and N samples per task)")
    p.add_argument("--max-seeds", type=positive_int, metavar="N", help="allow up to N seeds per model")
    p.add_argument("--max-models", type=positive_int, metavar="N", help="allow up to N models after sweep expansion")
    p.add_argument("--max-task-gib", type=positive_int, metavar="N", help="allow an encoding to render up to N GiB of inputs per task")


def _model_options(p: argparse.ArgumentParser) -> None:
    """`--model`, `--model-args`, `--model-tags` of the commands that train (`_add_models`)."""
    p.add_argument("--model", action="append", metavar="GLOB|ADAPTER|FILE.py:Name[=ID]",
                   help="only models whose id or sweep id matches (glob; repeatable); an adapter name that is no model "
                        "of the suite adds that adapter with its default parameters; FILE.py:Name or package.module:Name "
                        "adds that model (an Adapter subclass or an nn.Module factory build(in_shape, n_out)), "
                        "named ID after '=' (a/net.py:Net=net-a) or else Name")
    p.add_argument("--model-args", metavar="K=V,...", help="parameters of an adapter added with --model (e.g. width=64,lr=0.01)")
    p.add_argument("--model-tags", metavar="TAG,...", help="tags of a model added with --model, beside its adapter's (e.g. lazy: the suite's @lazy claims judge it)")


def _threads_option(p: argparse.ArgumentParser) -> None:
    """`--threads N` of the commands that train (compbench.runner.threads)."""
    from compbench.runner.threads import MAX_THREADS

    p.add_argument("--threads", type=int_in(0, MAX_THREADS), metavar="N",
                   help="torch threads per process that trains (default 1 per process, each pool worker included: "
                        "small tensors gain little from more, and lose much on a busy machine); 0: torch's own default")


def _apply_limits(args: argparse.Namespace) -> None:
    from compbench.limits import set_limits

    changes = {}
    if getattr(args, "max_cells", None) is not None:
        changes.update(cells_per_task=args.max_cells, samples_per_task=args.max_cells)
    if getattr(args, "max_seeds", None) is not None:
        changes["seeds"] = args.max_seeds
    if getattr(args, "max_models", None) is not None:
        changes["models"] = args.max_models
    if getattr(args, "max_task_gib", None) is not None:
        changes["task_bytes"] = args.max_task_gib * 2**30
    if changes:
        set_limits(**changes)


def _verbosity(p: argparse.ArgumentParser, quiet: str, verbose: str) -> None:
    """-q/--quiet and -v/--verbose, with what each does for this command.

    Not exclusive: they govern different output (`check -q -v`: no progress display, every comparison).
    """
    p.add_argument("-q", "--quiet", action="store_true", help=quiet)
    p.add_argument("-v", "--verbose", action="store_true", help=verbose)


def _results_option(p: argparse.ArgumentParser, deprecated_out: bool) -> None:
    """`--results DIR`, the one name of the results directory in every command.

    `run` and `report` called it `--out` before; that spelling still works there (same destination),
    so no script breaks, but only `--results` is documented.
    """
    names = ["--results", "--out"] if deprecated_out else ["--results"]
    p.add_argument(*names, dest="results", metavar="DIR",
                   help="results directory holding the store and the report (default results/<suite name>)"
                        + ("; --out is a deprecated alias" if deprecated_out else ""))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `compbench` command."""
    from compbench import __version__

    parser = argparse.ArgumentParser(prog="compbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"compbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train, theory-predict and score every cell of a suite")
    run.add_argument("--suite", required=True, help="suite name (suites/NAME.yaml) or path to a YAML file")
    _model_options(run)
    run.add_argument("--seeds", type=positive_int, help="override the number of seeds (seeds 0..N-1)")
    run.add_argument("--profile", help="apply a named profile of the suite (e.g. 'full' for GPU runs)")
    run.add_argument("--task", action="append", metavar="GLOB",
                     help="only tasks whose id matches (glob; repeatable); like --model, expectations are judged on what ran")
    _results_option(run, deprecated_out=True)
    run.add_argument("--fail-fast", action="store_true",
                     help="stop at the first failed cell (--executor local), keep what finished, write the report, exit 1")
    run.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    run.add_argument("--force", action="store_true", help="recompute the selected cells (all, or those of --model), replacing their stored records")
    run.add_argument("--executor", default="auto", choices=["auto", "local", "process", "ray"],
                     help="where cells run: auto (default: a pool of one-thread workers on every usable core when there is "
                          "enough to compute, else this process), this process, a local process pool (--workers), or Ray")
    run.add_argument("--workers", type=positive_int, default=None,
                     help="process-pool size (--executor auto or process; default one per usable core; at most 2 per usable "
                          "core, and one per cell to run)")
    run.add_argument("--address", help="Ray cluster address (--executor ray; default: start a local instance)")
    run.add_argument("--cell-timeout", type=positive_float, metavar="SECONDS",
                     help="kill a job running longer and record it as an error (--executor process or ray)")
    run.add_argument("--gpus-per-cell", type=positive_float, default=0.25,
                     help="GPU fraction Ray reserves per job on CUDA, so small cells share a GPU (default 0.25)")
    _verbosity(run, "no progress display and no leaderboard table (the summary line, failing expectations and errors only)",
               "a progress line for every finished job, and every failed seed's error")
    run.add_argument("--format", default=",".join(DEFAULT_FORMATS), help=f"report formats, comma-separated (default {','.join(DEFAULT_FORMATS)}; predictions is predictions.parquet, "
                          "predictions-csv the same table as CSV; any registered writer: compbench list)")
    _limit_options(run)
    _threads_option(run)
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="rebuild a suite's leaderboard from stored records (no training)")
    rep.add_argument("--suite", help="suite name or path (not needed with a bundle: it holds its suite)")
    _results_option(rep, deprecated_out=True)
    rep.add_argument("--report-dir", metavar="DIR",
                     help="write the report here rather than into the results directory (required when --results is a bundle)")
    _verbosity(rep, "no leaderboard table (the headline, failing expectations and errors only)", "every failed seed's error, not only the first per cell")
    rep.add_argument("--profile", help="report this profile's cells, not those of the profile the last run used (summary.json "
                                      "records it; default: no profile)")
    rep.add_argument("--format", default=",".join(DEFAULT_FORMATS),
                     help=f"report formats, comma-separated (default {','.join(DEFAULT_FORMATS)}; predictions-csv adds predictions.csv)")
    rep.set_defaults(func=cmd_report)
    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite", required=True, help="suite name or path")
        _results_option(p, deprecated_out=False)
        p.add_argument("--seeds", type=positive_int, help="number of seeds")
        p.add_argument("--seed-start", type=seed_int, help="first seed (with --seeds; default 0)")
        p.add_argument("--profile", help="a named profile of the suite")
        p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
        _model_options(p)
        # A check runs the cells its baseline recorded: one recorded with --task is checked with the same --task (a
        # cell of another task is `new`, one left out `missing`).
        p.add_argument("--task", action="append", metavar="GLOB",
                       help="only tasks whose id matches (glob; repeatable), as run's --task; check with the --task the "
                            "baseline was recorded with")
        _threads_option(p)
        _verbosity(p, "no progress display", "every comparison (check) or every recorded cell (baseline record)")

    base = sub.add_parser("baseline", help="record baselines for `compbench check`")
    base_sub = base.add_subparsers(dest="baseline_command", required=True)
    rec = base_sub.add_parser("record", help="run the suite and record per-cell score distributions over seeds")
    run_options(rec)
    rec.add_argument("--out", required=True, help="baseline JSON file to write, e.g. baselines/<family>.json")
    rec.set_defaults(func=cmd_baseline_record)
    chk = sub.add_parser("check", help="fail when a model's scores regress beyond seed noise against a baseline")
    run_options(chk)
    chk.add_argument("--baseline", required=True, help="baseline JSON file, the name of a bundled one (kernel-limits), "
                                                        "or history:N, the trailing N runs in --results")
    chk.add_argument("--fdr", type=unit_interval, metavar="Q",
                     help="gate on Benjamini–Hochberg at level Q over the cells' one-sided Welch p-values (floors kept) "
                          "instead of k·SE, which is shown beside")
    chk.add_argument("--k", type=positive_float, help="tolerance in combined standard errors (default per metric: 2.5)")
    chk.add_argument("--update", action="store_true", help="write the current scores as the new baseline")
    chk.add_argument("--allow-new", action="store_true",
                     help="accept cells the baseline does not have (by default a new cell fails the check)")
    chk.set_defaults(func=cmd_check)
    cmp = sub.add_parser("compare", help="pair two runs' cells (suite, model, task, seed): which regressed, were fixed, "
                                         "are new or gone, and which expectation verdicts flipped")
    cmp.add_argument("a", metavar="A", help="the earlier side: a results directory, or a run id of the store in --results")
    cmp.add_argument("b", metavar="B", help="the later side, likewise")
    cmp.add_argument("--results", metavar="DIR", help="the results directory whose store holds the run ids given as A or B")
    cmp.add_argument("--fail-on", choices=["regressed", "changed"],
                     help="exit 1 when a cell regressed or a verdict now fails (regressed), or on any change (changed)")
    cmp.add_argument("--format", metavar="LIST",
                     help="also write: md (compare.md, PR-comment sized), json (compare.json), github ($GITHUB_STEP_SUMMARY)")
    cmp.add_argument("--out", metavar="DIR", default=".", help="folder for compare.md and compare.json (default: here)")
    cmp.set_defaults(func=cmd_compare)
    his = sub.add_parser("history", help="a metric of a (model, task) or a model family across a suite's recorded runs, "
                                         "one row per run with its commit; --plot draws it")
    his.add_argument("--suite", required=True, help="suite name, or its file (its name is read from it)")
    _results_option(his, deprecated_out=False)
    his.add_argument("--model", action="append", metavar="GLOB", help="only models whose id matches (glob: a family; repeatable)")
    his.add_argument("--task", action="append", metavar="GLOB", help="only tasks whose id matches (glob; repeatable)")
    his.add_argument("--metric", help="the metric to show (default: each task's leaderboard score: heldout_r2, "
                     "heldout_acc, or heldout_acc_samples where its cells have several samples)")
    his.add_argument("--last", type=positive_int, metavar="N", help="only the last N runs")
    his.add_argument("--format", choices=HISTORY_FORMATS, default="md", help="md (a table, default), json or csv")
    his.add_argument("-o", "--output", metavar="FILE", help="write the table to FILE instead of printing it")
    his.add_argument("--plot", metavar="FILE", help="also draw it (.png or .svg): runs on the x axis, labelled by commit")
    his.set_defaults(func=cmd_history)
    bnd = sub.add_parser("bundle", help="write one file holding a suite's results (store with every run and record, "
                                        "suite file, summary.json, hashes) that report and compare read like a directory")
    bnd.add_argument("--suite", required=True, help="suite name or path")
    _results_option(bnd, deprecated_out=False)
    bnd.add_argument("-o", "--output", required=True, metavar="FILE", help="the bundle to write (e.g. kernel-limits.cbz)")
    bnd.add_argument("--current", action="store_true", help="only the current records and the runs that reported "
                     "them (what report, check and the last run's compare read; history starts at the first run kept)")
    bnd.set_defaults(func=cmd_bundle)
    site = sub.add_parser("site", help="build one static HTML site over several suites' results (directories or bundles)")
    site.add_argument("results", nargs="+", metavar="DIR_OR_BUNDLE", help="results directories (results/<suite>) or bundles")
    site.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder the site is written to")
    site.set_defaults(func=cmd_site)
    lst = sub.add_parser("list", help="bundled suites and every registered task family, encoding, adapter, claim, report format")
    lst.set_defaults(func=cmd_list)
    show = sub.add_parser("show", help="an adapter's, task family's, encoding's, claim's or report format's parameters")
    show.add_argument("name")
    show.set_defaults(func=cmd_show)
    val = sub.add_parser("validate", help="check a suite file without running it")
    val.add_argument("path")
    _verbosity(val, "no output when the suite is valid (the exit code says it)", "list the models and tasks")
    _limit_options(val)
    val.set_defaults(func=cmd_validate)
    return parser


@contextmanager
def _fewer_full_collections() -> Iterator[None]:
    """Fewer full garbage collections while a command runs (the previous thresholds are restored).

    A run holds every record of the suite (15 000 for kernel-limits, each with its prediction
    lists) for its whole life, and each full collection walks all of them: four of them were
    about 0.3 s of a 2 s cached run. Young objects are still collected as usual; a full
    collection now waits for ten times as many younger ones (CPython: threshold2 10 → 100).
    """
    import gc

    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `compbench` console script."""
    try:
        args = build_parser().parse_args(argv)
        args.command_line = shlex.join(["compbench", *(sys.argv[1:] if argv is None else argv)])  # the runs table's
        _apply_limits(args)
        from compbench.runner.memory import keep_freed_memory

        keep_freed_memory()  # training's large blocks are reused, not page-faulted back in every step
        with _fewer_full_collections():
            code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe is met here, not in the interpreter's exit flush
        from compbench.runner.interrupt import EXIT_TERMINATED, ignore_further_interrupts

        if argv is None and code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            # The command line's process exits now: a further Ctrl-C must not traceback on the way out.
            ignore_further_interrupts()
        return code
    except BrokenPipeError:
        # The reader went away (`compbench list | head -1`). As the Python docs advise: point stdout
        # at devnull so the exit flush cannot fail again, and leave without a traceback.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no file (captured in-process)
            pass
        return EXIT_FAILED


def _dispatch(args: argparse.Namespace) -> int:
    """Run the chosen command; exit codes for the errors every command can meet."""
    from compbench.errors import CompbenchError
    from compbench.runner.interrupt import EXIT_TERMINATED, sigterm_as_interrupt, terminated

    # SIGTERM (a CI job cancelled, `kill`) stops the run like Ctrl-C; the exit code says which it was.
    with sigterm_as_interrupt():
        try:
            code = args.func(args)
        except CompbenchError as exc:  # every error compbench raises on purpose says its line and its exit code
            print(exc.message(), file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:  # outside a run's own handling (e.g. while writing the report)
            print("interrupted: finished cells are kept; run the same command again to resume", file=sys.stderr)
            code = EXIT_INTERRUPTED
        return EXIT_TERMINATED if code == EXIT_INTERRUPTED and terminated() else code



__all__ = [
    "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "build_parser", "cmd_baseline_record", "cmd_bundle",
    "cmd_check", "cmd_compare", "cmd_history", "cmd_list", "cmd_report", "cmd_run", "cmd_show", "cmd_site",
    "cmd_validate", "int_in", "main", "positive_float", "positive_int", "seed_int", "unit_interval",
]
