"""Fuzzing the command line: random flags of every subcommand, taken from the real parser, with random values.

Every invocation runs `compbench.cli.main(argv)` in this process with its output captured and must
end in exit 0, 1 or 2 (argparse's usage errors included), never an exception. What a drawn
invocation can train is a tiny kernel-only suite written here (one closed-form model, one seed),
and it runs in a scratch directory, so the default `results/` lands there too.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compbench.cli import build_parser, main
from compbench.limits import limits, set_limits
from tiny_suites import suite_text

TINY = suite_text("te22", name="fuzzcli")


def _commands() -> dict[tuple[str, ...], list[argparse.Action]]:
    """Every leaf subcommand (('baseline', 'record'), ('list',), ...) → its arguments, from the real parser."""
    out: dict[tuple[str, ...], list[argparse.Action]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, sub in subs[0].choices.items():
                walk(sub, prefix + (name,))
        else:
            out[prefix] = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]

    walk(build_parser(), ())
    return out


COMMANDS = _commands()
# Adapter names would add a network trained from its defaults (minutes): --model draws only these.
MODEL_PATTERNS = ["k", "*", "k*", "nothing", "kernel", "", "[", "@kernels"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-fuzz")
    (root / "tiny.yaml").write_text(TINY)
    (root / "bad.yaml").write_text("name: [\n")
    (root / "adir").mkdir()
    return root


def _anything(root: Path) -> st.SearchStrategy[str]:
    paths = [str(root / "tiny.yaml"), str(root / "bad.yaml"), str(root / "adir"), str(root / "no" / "such.yaml"),
             "tiny.yaml", "kernel-limits-none", str(root / "out1"), str(root / "b.json")]
    return st.one_of(
        st.integers(-5, 5).map(str), st.sampled_from(["99999999999999999999", "4294967296", "1e3", "1.5", "-0", "0x10",
                                                      "nan", "inf", "-inf", "", " ", "１２", "٣"]),
        st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12),
        st.sampled_from(paths),
    )


def _valid(root: Path, action: argparse.Action) -> st.SearchStrategy[str]:
    """A value the option takes (so that a draw gets past the parser often and runs the command)."""
    if action.choices:
        return st.sampled_from(list(action.choices))
    by_dest = {
        "suite": [str(root / "tiny.yaml")], "path": [str(root / "tiny.yaml"), str(root / "bad.yaml")],
        "out": [str(root / "out1"), str(root / "b.json")], "results": [str(root / "out1"), str(root / "out2"), str(root / "k.cbz")],
        "output": [str(root / "k.cbz"), str(root / "tiny.yaml"), str(root / "adir")], "report_dir": [str(root / "out3")],
        "baseline": [str(root / "b.json")], "model": MODEL_PATTERNS, "name": ["kernel", "mlp", "additive", "ordered", "md"],
        "model_args": ["kernel=overlap,weights=[0,0.3,1]", "weights=[0,true,1]", "a=1,a=2", "x", "weights=[[[["],
        "format": ["md", "csv", "md,csv", "predictions", "nope"], "profile": ["full", "none"], "address": ["auto"],
        "seeds": ["1", "2", "3"], "seed_start": ["0", "7", "4294967295"], "workers": ["1", "2", "1000"],
        "max_cells": ["1", "1000000"], "max_seeds": ["1", "5"], "max_models": ["1", "100"],
        "cell_timeout": ["30", "0.001"], "gpus_per_cell": ["0.25", "1"], "k": ["2.5", "0.5"],
    }
    return st.sampled_from(by_dest.get(action.dest, ["1"]))


def _values(root: Path, action: argparse.Action) -> st.SearchStrategy[str]:
    return st.integers(0, 3).flatmap(lambda i: _valid(root, action) if i else _anything(root))


@st.composite
def invocations(draw, root: Path) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    argv = list(command)
    for action in COMMANDS[command]:
        if not action.option_strings:  # a positional: almost always given
            if draw(st.integers(0, 9)):
                argv.append(draw(_values(root, action)))
            continue
        if not (action.required and draw(st.integers(0, 9))) and draw(st.integers(0, 2)):
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, draw(_values(root, action))]
    if draw(st.integers(0, 5)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--bogus", "-x", "--", "--seeds"])))
    return argv


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_subcommand_with_random_arguments_exits_0_1_or_2(scratch, data):
    argv = data.draw(invocations(scratch))
    saved, cwd = limits(), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.chdir(scratch)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse's own usage errors
                rc = exc.code
    finally:
        os.chdir(cwd)
        set_limits(**dataclasses.asdict(saved))
    text = out.getvalue() + err.getvalue()
    assert rc in (0, 1, 2), (argv, rc, text[-3000:])
    assert "Traceback" not in text, (argv, text[-3000:])
