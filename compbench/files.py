"""Every file compbench writes or deletes in a results directory (and a baseline) goes through here.

The rules: a path is given relative to its root and may not leave it (no `..`, no absolute path);
nothing beneath the root is followed if it is a symbolic link (a link where a file or folder goes
is refused: a results directory arrives in pull requests, and a link there could point anywhere);
a file is written to a temporary file in its own folder, synced and renamed over the old one, so
a reader sees the old file or the new one, never half of either; an OS error (a full disk, a
read-only file system) becomes an `OutputError` with one line naming the file.

The root itself, and the folders above it, are followed: they are the path the user typed.
Standard library only: the store, the report and the baselines all import it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from compbench.errors import CompbenchError


class OutputError(CompbenchError, RuntimeError):
    """A file could not be written, read back or removed safely; the message is one line naming it."""


def write_atomic(root: Path, relative: str | Path, data: bytes | str) -> Path:
    """Write data (str: UTF-8) to root/relative atomically, creating folders below root; return the path."""
    parts = _parts(root, relative, "write")
    path = Path(root, *parts)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        dfd = _open_dirs(Path(root), parts[:-1], create=True, verb="write")
        try:
            _refuse_non_file(dfd, parts[-1], path, "write")
            _replace(dfd, parts[-1], payload)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise OutputError(_describe(path, "write", exc)) from None
    return path


def build_atomic(root: Path, relative: str | Path, build: Callable[[Path], None]) -> Path:
    """Have `build` make root/relative at a temporary path beside it, then sync it and rename it over the old one.

    For a file another library writes by its path (SQLite writes a bundle): a reader, or a
    command killed halfway, sees the old file or the new one, never half of either.
    """
    parts = _parts(root, relative, "write")
    path = Path(root, *parts)
    tmp = f".{parts[-1]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        dfd = _open_dirs(Path(root), parts[:-1], create=True, verb="write")
        try:
            _refuse_non_file(dfd, parts[-1], path, "write")
            try:
                build(path.with_name(tmp))
                fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                for name in (tmp, f"{tmp}-journal", f"{tmp}-wal", f"{tmp}-shm"):
                    try:
                        os.unlink(name, dir_fd=dfd)
                    except OSError:
                        pass
                raise
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise OutputError(_describe(path, "write", exc)) from None
    return path


def remove_contained(root: Path, relative: str | Path) -> bool:
    """Remove the regular file root/relative (never a link, never outside root); False if it was not there."""
    parts = _parts(root, relative, "delete")
    path = Path(root, *parts)
    try:
        try:
            dfd = _open_dirs(Path(root), parts[:-1], create=False, verb="delete")
        except FileNotFoundError:
            return False
        try:
            try:
                _refuse_non_file(dfd, parts[-1], path, "delete")
                os.unlink(parts[-1], dir_fd=dfd)
            except FileNotFoundError:
                return False
        finally:
            os.close(dfd)
    except OSError as exc:
        raise OutputError(_describe(path, "delete", exc)) from None
    return True


def read_contained(root: Path, relative: str | Path) -> bytes | None:
    """The bytes of the regular file root/relative; None if it is missing, outside root, or reached through a link."""
    fd = _open_file(root, relative)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def sha256_contained(root: Path, relative: str | Path) -> str | None:
    """The sha256 of the regular file root/relative, None where `read_contained` gives None."""
    fd = _open_file(root, relative)
    if fd is None:
        return None
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def stat_contained(root: Path, relative: str | Path) -> os.stat_result | None:
    """The status of the regular file root/relative, None where `read_contained` gives None (nothing of it is read)."""
    fd = _open_file(root, relative)
    if fd is None:
        return None
    try:
        return os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def refuse_links(root: Path, relative: str | Path, verb: str = "open") -> None:
    """An OutputError if a folder below root, or the file, of root/relative is a symbolic link, or the file
    is a FIFO, a socket or a device.

    For a file another library opens by its path (SQLite opens the store): the rule of every
    write here, checked before it is opened; a FIFO would make that open wait for a writer for ever.
    A missing folder or file is fine (it is about to be made); a folder is left to the caller to name.
    """
    parts = _parts(root, relative, verb)
    path = Path(root, *parts)
    try:
        dfd = _open_dirs(Path(root), parts[:-1], create=False, verb=verb)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(_describe(path, verb, exc)) from None
    try:
        if _is_link(dfd, parts[-1]):
            raise OutputError(f"{path}: is a symbolic link; compbench never {verb}s through links in a results "
                              f"directory (the file would live outside it): remove the link (the file it points "
                              f"to was not touched)")
        kind = _special_kind(dfd, parts[-1])
        if kind:
            raise OutputError(f"{path}: is {kind}, not a regular file; compbench refuses to {verb} it "
                              f"(it could wait for ever): move it aside")
    finally:
        os.close(dfd)


def _open_file(root: Path, relative: str | Path) -> int | None:
    """A read descriptor of the regular file root/relative; None if missing, outside root, or reached through a link."""
    try:
        parts = _parts(root, relative, "read")
        dfd = _open_dirs(Path(root), parts[:-1], create=False, verb="read")
    except (OSError, OutputError):
        return None
    try:
        # O_NONBLOCK: a FIFO put where a file goes must not hang the command (it is refused below).
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd


def _parts(root: Path, relative: str | Path, verb: str) -> tuple[str, ...]:
    """The path's names below root; an OutputError for an absolute path, `..`, or nothing at all."""
    rel = PurePosixPath(str(relative).replace(os.sep, "/"))
    parts = tuple(p for p in rel.parts if p != ".")
    if rel.is_absolute() or ".." in parts or not parts or "\x00" in str(relative):
        raise OutputError(f"{root}: refusing to {verb} {str(relative)!r}: not a path inside the results directory {root}")
    return parts


def _open_dirs(root: Path, names: tuple[str, ...], *, create: bool, verb: str) -> int:
    """A descriptor of root/names…, each name a real folder (not a link); created when missing if asked."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    here = root
    for name in names:
        here = here / name
        try:
            try:
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:  # made by a concurrent run: opened below like any other
                    pass
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, name):
                    raise OutputError(f"{here}: is a symbolic link; compbench never {verb}s through links in a "
                                      f"results directory: replace it with a real folder") from None
                raise
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        fd = nfd
    return fd


def _is_link(dfd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"))


def _special_kind(dfd: int, name: str) -> str | None:
    """'a FIFO (named pipe)', 'a socket', … for such a file; None for a regular file, a folder, a link or nothing."""
    try:
        mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except OSError:
        return None
    return next((kind for test, kind in _SPECIAL if test(mode)), None)


def _refuse_non_file(dfd: int, name: str, path: Path, verb: str) -> None:
    """An OutputError if name is a link or a folder (a missing file is fine: it is about to be made)."""
    try:
        mode = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        if verb == "delete":
            raise
        return
    if stat.S_ISLNK(mode):
        raise OutputError(f"{path}: is a symbolic link; compbench never {verb}s through links in a results "
                          f"directory: remove the link (the file it points to was not touched)")
    if not stat.S_ISREG(mode):
        raise OutputError(f"{path}: is not a regular file; refusing to {verb} it: move it aside")


_TEMPORARY = re.compile(r"\..+\.[0-9]+\.[0-9a-f]{8}\.tmp")


def is_temporary(name: str) -> bool:
    """Whether a file name is one of `write_atomic`'s half-written temporaries (another process may be writing it)."""
    return _TEMPORARY.fullmatch(name) is not None


def _replace(dfd: int, name: str, payload: bytes) -> None:
    # A temporary name of this process's own: concurrent runs publishing into one folder must not
    # write into each other's half-written file (the last complete one wins).
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dfd)
    try:
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    os.fsync(dfd)  # the rename itself survives a power cut


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]


_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "it is a folder",
}


def _describe(path: Path, verb: str, exc: OSError) -> str:
    """One line: the file, what failed, why, and that the previous file is intact."""
    why = _WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    detail = f"{why} ({exc.strerror})" if exc.strerror and why != exc.strerror else why
    if verb == "write":
        kept = "the previous version of the file, if any, is unchanged"
        return f"{path}: cannot write: {detail}; {kept}; fix that and run the same command again"
    return f"{path}: cannot {verb}: {detail}"
