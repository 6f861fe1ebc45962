"""Drive ``wrk`` (Debian package ``wrk``), a load generator in its own process, with a POST body."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    """What one ``wrk`` run measured.

    Attributes:
        requests_per_second: Completed requests per second over the run.
        p50_ms: Median latency, milliseconds.
        p99_ms: 99th percentile latency, milliseconds.
        requests: Requests completed.
        errors: Non-2xx answers plus socket errors (connect, read, write, timeout).
    """

    requests_per_second: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


def ensure_wrk() -> str:
    """The ``wrk`` binary; installs Debian's ``wrk`` package when missing (root, as on our machines).

    Raises:
        RuntimeError: wrk is missing and could not be installed.
    """
    found = shutil.which("wrk")
    if found:
        return found
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    if subprocess.run(install, check=False, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], check=False, capture_output=True)
        subprocess.run(install, check=False, capture_output=True)
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("wrk is not installed and `apt-get install wrk` failed")
    return found


def _ms(value: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", value)
    if match is None:
        raise ValueError(f"unexpected wrk duration {value!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse(output: str) -> LoadResult:
    """Read ``wrk --latency`` output.

    Raises:
        ValueError: The output lacks the figures (wrk failed).
    """
    percentiles = dict(re.findall(r"^\s+(50|99)(?:\.0+)?%\s+(\S+)\s*$", output, re.M))
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    total = re.search(r"^\s+(\d+) requests in", output, re.M)
    if rps is None or total is None or set(percentiles) != {"50", "99"}:
        raise ValueError(f"wrk output not understood:\n{output}")
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    errors = (int(non_2xx.group(1)) if non_2xx else 0) + (sum(map(int, sockets.groups())) if sockets else 0)
    return LoadResult(
        requests_per_second=float(rps.group(1)),
        p50_ms=_ms(percentiles["50"]),
        p99_ms=_ms(percentiles["99"]),
        requests=int(total.group(1)),
        errors=errors,
    )


def run_wrk(url: str, body: str, *, seconds: float, connections: int, threads: int = 1) -> LoadResult:
    """POST ``body`` (JSON) to ``url`` with ``connections`` open connections for ``seconds`` seconds."""
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-") as folder:
        script = Path(folder) / "post.lua"
        script.write_text(
            f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [==[{body}]==]\n'
        )
        result = subprocess.run(
            [
                wrk,
                f"-t{threads}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                "--latency",
                "-s",
                str(script),
                url,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    return parse(result.stdout + result.stderr)


__all__ = ["LoadResult", "ensure_wrk", "parse", "run_wrk"]
