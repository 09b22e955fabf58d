"""The fork server's side: a process that has loaded the broker and forks one for every request.

The caller's side, and the format of a request, are in :mod:`trafka.broker.testing.forkserver`.
"""
from __future__ import annotations

import array
import gc
import json
import os
import select
import signal
import socket
import sys
import traceback

from trafka.broker.testing.forkserver import FDS_PER_REQUEST, INT, LENGTH, receive_exactly
from trafka.broker.tools import cli


def serve(connection: socket.socket) -> None:
    """Import the broker, then fork a broker for every request until the caller closes ``connection``."""
    cli.preload()
    gc.collect()
    gc.freeze()  # what the imports made stays shared with every child, untouched by their collections

    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the brokers and their caller; they decide
    status_pipes: dict[int, int] = {}
    while True:
        readable = select.select([connection, wakeup_read], [], [])[0]
        if wakeup_read in readable:
            os.read(wakeup_read, 512)
            _report_exits(status_pipes)
        if connection in readable:
            request = _receive_request(connection)
            if request is None:
                return
            (argv, cwd, env), fds = request
            pid = os.fork()
            if pid == 0:
                connection.close()
                os.close(wakeup_read)
                os.close(wakeup_write)
                for fd in status_pipes.values():
                    os.close(fd)
                _run_broker(argv, cwd, env, fds)
            for fd in fds[:3]:
                os.close(fd)
            status_pipes[pid] = fds[3]
            connection.sendall(INT.pack(pid))


def _receive_request(connection: socket.socket) -> tuple[tuple[list[str], str, dict[str, str]], list[int]] | None:
    fds = array.array("i")
    message, ancillary, _, _ = connection.recvmsg(LENGTH.size, socket.CMSG_SPACE(FDS_PER_REQUEST * fds.itemsize))
    if not message:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    message += receive_exactly(connection, LENGTH.size - len(message))  # (nothing when it came whole)
    body = json.loads(receive_exactly(connection, LENGTH.unpack(message)[0]))
    return (body["argv"], body["cwd"], body["env"]), list(fds)


def _report_exits(status_pipes: dict[int, int]) -> None:
    while status_pipes:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_pipes.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, INT.pack(os.waitstatus_to_exitcode(status)))
            except OSError:  # its caller is gone
                pass
            os.close(fd)


def _run_broker(argv: list[str], cwd: str, env: dict[str, str], fds: list[int]) -> None:
    """In the forked child: become ``python -m trafka <argv>`` and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL if signum == signal.SIGCHLD else signal.default_int_handler)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["trafka", *argv]
        sys.stdout.reconfigure(line_buffering=True)
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
