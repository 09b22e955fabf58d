"""Brokers for tests started by forking a process that has imported trafka once.

Run as ``python -P -m trafka``, a broker spends most of its start in the interpreter's start and its
imports, the same for every start. A test suite starts brokers many times, so :class:`TrafkaBroker` asks a
fork server instead: one process per test process, started on the first broker, which imports the broker
and everything its start needs, then waits. Asked for a broker, it forks; the child takes the caller's
standard streams, working directory, environment and arguments and runs the ``trafka`` command as
``python -m trafka`` would. From the second start on, a broker is ready in the time of its own start work.

The caller gets a :class:`ForkedBroker`, which answers what :class:`subprocess.Popen` answers for the
broker (``pid``, ``stdout``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``).
The server is the broker's parent, so it reaps it and reports its exit status over a pipe that the caller
passed with the request. The server exits when its caller goes (its request socket closes); the brokers it
started are left to their callers, as a subprocess is.

This module is the caller's side; the server's is :mod:`trafka.broker.tools.forkserver`. A request, on a
Unix stream socket: a 4-byte big-endian length, a JSON object (``argv``, ``cwd``, ``env``) and, as
ancillary data, the broker's stdin, stdout and stderr and the status pipe's write end. The answer: the
broker's pid, 4 bytes. When the broker exits the server writes its status, as ``Popen.returncode`` gives
it (a signal as its negative number), 4 bytes, to the status pipe.
"""
from __future__ import annotations

import array
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading

LENGTH = struct.Struct(">I")
INT = struct.Struct(">i")
#: stdin, stdout, stderr and the status pipe, in that order.
FDS_PER_REQUEST = 4


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering."""


class ForkedBroker:
    """A broker forked by the fork server, as the caller sees it (a :class:`subprocess.Popen` for it)."""

    def __init__(self, pid: int, args: list[str], stdout: int, status: int) -> None:
        self.pid = pid
        self.args = args
        self.stdout = os.fdopen(stdout, "r", encoding="utf-8", errors="replace")
        self.returncode: int | None = None
        self._status = status
        self._received = b""

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # an exited broker's pid may be another process's by now
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_status(self) -> None:
        while len(self._received) < INT.size:
            chunk = os.read(self._status, INT.size - len(self._received))
            if not chunk:  # the server went before the broker: its status is unknown
                self._received = INT.pack(-signal.SIGKILL)
                break
            self._received += chunk
        self.returncode = INT.unpack(self._received)[0]
        os.close(self._status)  # stdout stays open, as Popen leaves it, for whoever still reads it

    def __del__(self) -> None:
        if self.returncode is None:
            try:
                os.close(self._status)
            except OSError:
                pass


class ForkServerClient:
    """This process's connection to its fork server, started on first use and again if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._owner = 0

    def launch(self, argv: list[str], stderr: int, env: dict[str, str], cwd: str | os.PathLike[str] | None = None,
               ) -> ForkedBroker:
        """Start ``trafka <argv>`` in ``cwd`` (default: this process's), with stdin on /dev/null, stdout on a
        new pipe and stderr on ``stderr``."""
        with self._lock:
            connection = self._connection()
            stdout_read, stdout_write = os.pipe()
            status_read, status_write = os.pipe()
            try:
                with open(os.devnull, "rb") as stdin:
                    request = json.dumps({"argv": argv, "cwd": os.fspath(cwd or os.getcwd()), "env": env}).encode()
                    fds = array.array("i", [stdin.fileno(), stdout_write, stderr, status_write])
                    connection.sendmsg([LENGTH.pack(len(request)) + request],
                                       [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                answer = receive_exactly(connection, INT.size)
            except OSError as exc:
                for fd in (stdout_read, status_read):
                    os.close(fd)
                self.close()
                raise ForkServerError(f"the fork server stopped answering: {exc}") from exc
            finally:
                os.close(stdout_write)
                os.close(status_write)
        return ForkedBroker(INT.unpack(answer)[0], ["trafka", *argv], stdout_read, status_read)

    def _connection(self) -> socket.socket:
        if self._owner != os.getpid() or self._server is None or self._server.poll() is not None:
            self.close()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with theirs:
                self._server = subprocess.Popen(
                    [sys.executable, "-P", "-c", _SERVER_MAIN, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            self._socket, self._owner = ours, os.getpid()
        assert self._socket is not None
        return self._socket

    def close(self) -> None:
        """Stop the fork server (the brokers it started go on) and forget it; the next launch starts another."""
        if self._socket is not None:
            self._socket.close()  # the server exits when it reads the end
        if self._server is not None and self._owner == os.getpid():
            try:
                self._server.wait(5)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._socket = self._server = None


def receive_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("the fork server closed the connection")
        data += chunk
    return data


#: The fork server's program; its argument is the number of its end of the request socket.
_SERVER_MAIN = ("import socket, sys; from trafka.broker.tools.forkserver import serve; "
                "serve(socket.socket(fileno=int(sys.argv[1])))")
