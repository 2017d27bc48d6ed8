"""Where a run's results came from: the user's code (git), compbench's own, the suite file, the machine."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def _git(directory: Path, *args: str) -> bytes | None:
    """A git command's output in `directory`, None where git or a repository is absent (provenance is best effort)."""
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def head_sha(path: str | Path) -> str | None:
    """HEAD's commit of the repository holding `path` (a folder), None outside one."""
    sha = _git(Path(path), "rev-parse", "HEAD")
    return sha.decode().strip() or None if sha else None


def git_state(path: str | Path, dirty_hash: bool = True) -> dict[str, Any] | None:
    """The repository holding `path`: its root, HEAD's SHA, whether it is dirty, and a hash of the dirty state.

    The hash covers `git diff HEAD` (tracked changes, staged or not) and the untracked files' names and
    contents, so two runs from the same commit with different edits differ (`dirty_hash` False: not computed);
    None outside a repository.
    """
    path = Path(path).resolve()
    directory = path if path.is_dir() else path.parent
    root = _git(directory, "rev-parse", "--show-toplevel")
    if root is None:
        return None
    sha = head_sha(directory)
    status = _git(directory, "status", "--porcelain", "--untracked-files=all") or b""
    state: dict[str, Any] = {"repo": root.decode(errors="replace").strip(),
                             "sha": sha, "dirty": bool(status.strip())}
    if state["dirty"] and dirty_hash:
        h = hashlib.sha256(_git(directory, "diff", "HEAD", "--binary") or b"")
        untracked = _git(directory, "ls-files", "--others", "--exclude-standard", "-z") or b""
        for name in sorted(n for n in untracked.split(b"\0") if n):
            h.update(b"\0" + name + b"\0")
            try:
                h.update((Path(state["repo"]) / name.decode(errors="replace")).read_bytes())
            except OSError:
                pass  # gone since git listed it, or unreadable: its name still counts
        state["diff_sha256"] = h.hexdigest()
    return state


def file_sha256(path: str | Path) -> str | None:
    """The sha256 of a file's bytes, None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def machine(threads: int | None, device: str) -> dict[str, Any]:
    """The machine a run used: CPU, cores it may use, torch threads, and the GPU and CUDA where one ran it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out: dict[str, Any] = {"host": platform.node(), "platform": platform.platform(), "cpu": _cpu_name(),
                           "cpu_count": os.cpu_count(), "cores_usable": cores, "threads": threads, "device": device,
                           "python": platform.python_version()}
    torch = sys.modules.get("torch")  # only when the run imported it: a cached run never does (runner.run)
    if torch is not None:
        out["torch"] = getattr(torch, "__version__", None)
        if device == "cuda" and torch.cuda.is_available():
            out["cuda"] = torch.version.cuda
            out["gpu"] = torch.cuda.get_device_name(0)
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def code_paths(loaded: Any) -> list[Path]:
    """The user's files a suite's results depend on: the suite file and every file model's source (`file.py:Name`)."""
    from compbench.adapters.registry import get_adapter

    paths = [Path(loaded.path)] if getattr(loaded, "path", None) else []
    for name in dict.fromkeys(m.adapter for m in loaded.models):
        try:
            origin = getattr(get_adapter(name), "__compbench_origin__", None)
        except Exception:  # an adapter that cannot be resolved is the run's error to report, not provenance's
            continue
        if origin and Path(str(origin)).is_file():
            paths.append(Path(str(origin)))
    return list(dict.fromkeys(p.resolve() for p in paths))


def run_provenance(loaded: Any, command: str, threads: int | None, device: str) -> dict[str, Any]:
    """Everything a `runs` row records about where a run came from (store.ResultStore.begin_run)."""
    from compbench import __version__

    paths = code_paths(loaded)
    repos: dict[str, dict[str, Any]] = {}
    for p in paths:
        state = git_state(p)
        if state is not None:
            repos.setdefault(state["repo"], state)
    # compbench's own repository is often the suite's (a checkout of it): read once, not again (each git_state runs
    # `git status`, and `git diff HEAD` of a dirty tree, which took 3.5 s apiece in a checkout with large edits).
    own_dir = Path(__file__).resolve().parent
    root = _git(own_dir, "rev-parse", "--show-toplevel")
    own = repos.get(root.decode(errors="replace").strip()) if root is not None else None
    if own is None and root is not None:
        own = git_state(own_dir, dirty_hash=False)
    return {
        "command": command,
        "compbench": {"version": __version__, "commit": own["sha"] if own else None,
                      "dirty": own["dirty"] if own else None},
        "suite_file": str(loaded.path) if getattr(loaded, "path", None) else None,
        "suite_sha256": file_sha256(loaded.path) if getattr(loaded, "path", None) else None,
        "files": {str(p): file_sha256(p) for p in paths},
        "code": list(repos.values()),
        "machine": machine(threads, device),
    }
