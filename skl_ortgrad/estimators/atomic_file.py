"""Write a file so that it holds its old content or its new one, never a part of either.

Writing a file in place and being killed half-way (``kill -9``, power loss) leaves it torn.
:func:`write_atomically` writes a temporary file in the same folder (one file system, so
the rename cannot copy), flushes it to the disk, renames it over the target with
``os.replace`` (atomic on POSIX and Windows), then flushes the folder so the rename itself
survives a crash. A kill at any moment leaves the target whole, plus at worst a hidden
temporary file ``.<name>.<random>.tmp``.

This module imports only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import secrets


def _fsync_folder(folder: str) -> None:
    """Make the entries of ``folder`` (the rename) durable; POSIX only: Windows cannot
    open a folder, and its renames are journaled by NTFS."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def target_path(path: str | os.PathLike) -> str:
    """The absolute path of the file ``path`` names, checked before anything is written.

    Raises
    ------
    ValueError
        If ``path`` is empty, ends with a path separator, or is an existing folder: it
        names no file (an empty path would otherwise stand for the current folder, and
        the write would create its temporary file in the folder above).
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise ValueError("the path is empty: give the file to write, such as 'model.onnx'.")
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if text.endswith(separators) or os.path.isdir(text):
        raise ValueError(f"{text!r} is a folder, not a file: give the file to write, "
                         f"such as {os.path.join(text, 'model.onnx')!r}.")
    return os.path.abspath(text)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace the content of ``path`` with ``data`` in one step.

    Parameters
    ----------
    path : str or os.PathLike
        The file written (created, or replaced whole).
    data : bytes
        Its new content.

    Raises
    ------
    ValueError
        If ``path`` names no file (:func:`target_path`); nothing is written.
    OSError
        If the folder cannot be written; ``path`` is then unchanged and no temporary
        file is left behind.
    """
    path = target_path(path)
    folder, name = os.path.split(path)
    while True:
        temporary = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
        try:
            # O_EXCL: a fresh file, never an existing one or a symbolic link; the mode
            # is the one the umask gives new files, as open() would.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_folder(folder)
