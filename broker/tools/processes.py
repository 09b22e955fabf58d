"""The child processes the tools start (brokers, ZooKeeper): how they are stopped."""
from __future__ import annotations

import signal
import subprocess


def terminate(process: subprocess.Popen | None, timeout_s: float) -> bool:
    """Stop ``process`` cleanly: SIGTERM, then wait up to ``timeout_s`` for it to exit, and SIGKILL it
    if it has not. Returns False when it had to be killed; True when it exited by itself (or was not
    running)."""
    if process is None or process.poll() is not None:
        return True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True
