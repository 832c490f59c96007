"""A process's stdout lines, collected by a thread as they come.

A test that waits for a line must not call ``proc.stdout.readline()`` inside
``wait_until``: the readline blocks until the process prints, so the wait's
limit is never enforced. Here a daemon thread reads, and waits look at
``lines`` (a list that only grows).
"""
from __future__ import annotations

import subprocess
import threading


class ProcessLines:
    """The stdout lines (newline stripped) of a process started with
    ``stdout=PIPE, text=True``; the caller still owns and reaps the process."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._errors: list[str] = []
        # stderr is drained too: a full pipe would block a chatty process
        self._threads = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((proc.stdout, self.lines),
                                              (proc.stderr, self._errors)) if stream is not None]
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def _join(self) -> None:
        for t in self._threads:
            t.join(10)

    def has(self, line: str) -> bool:
        return line in list(self.lines)

    def values(self) -> list[str]:
        """The first field of every tab-separated line (ShareConsume's record values)."""
        return [line.split("\t")[0] for line in list(self.lines) if "\t" in line]

    def stderr(self) -> str:
        """What the process wrote to stderr so far."""
        return "\n".join(list(self._errors))

    def finish(self, timeout: float, what: str = "the process") -> list[str]:
        """Every line, once the process has exited by itself within ``timeout``
        seconds with exit code 0 (else an AssertionError with its output; a
        process still running is killed first)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._join()
            raise AssertionError(f"{what} still running after {timeout}s (killed)\n"
                                 f"{self.lines[-50:]}\n{self.stderr()[-3000:]}") from None
        self._join()
        assert self.proc.returncode == 0, \
            f"{what} exited {self.proc.returncode}\n{self.lines[-50:]}\n{self.stderr()[-3000:]}"
        return list(self.lines)

    def stop(self) -> list[str]:
        """Kill the process; every line it printed."""
        self.proc.kill()
        self.proc.wait()
        self._join()
        return list(self.lines)
