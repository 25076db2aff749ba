"""Process helpers the Python benchmarks share (bench/dashboard.py, bench/soak.py)."""
import os
import signal
import subprocess


def stop(p, sig=signal.SIGTERM):
    """Sends `sig` to the process group of `p` (woken first: a stopped process
    takes no signal but SIGKILL) and waits for it; SIGKILL after 60 s."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
