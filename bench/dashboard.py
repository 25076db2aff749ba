#!/usr/bin/env python3
"""bench/run.sh dashboard: what the live page costs (issue 31).

- dashboard_state_ms_32_nodes: GET /api/state (keep-alive, one client) with
  32 real `salamander node` processes in the cluster, a training job on
  them; the median of 300 requests (p99 beside it).
- dashboard_cpu_pct_10_pages: the supervisor's CPU (utime + stime from
  /proc) over windows with no page and with 10 pages (10 event-stream
  clients), alternated; the median rise, in % of one core. The job is
  paused through the dashboard for these windows, so the supervisor's own
  work is heartbeats and the status poll, and the rise is the pages'.
- dashboard_train_throughput_ratio: `train --stages 2` (the CNN) with the
  dashboard on and one page reading its stream, against off, alternated;
  the median of the per-pair ratios.

Devices: node processes on one host, not emulated (no cpu share); the
figures are the supervisor's costs, which emulation would not change.

Usage: dashboard.py SALAMANDER_BIN OUT_JSON [--quick]
"""
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchprocs import stop

BIN, OUT = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv[3:]
for a in sys.argv[3:]:
    if a != "--quick":
        sys.exit(f"dashboard: unknown option {a} (only --quick)")
WORK = tempfile.mkdtemp(prefix="salamander-bench-dashboard-")
SECRET = os.urandom(8).hex()
ENV = dict(os.environ, SALAMANDER_SECRET=SECRET, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
ENV.pop("SALAMANDER_TLS", None)
PROCS = []
TICK = os.sysconf("SC_CLK_TCK")


def start(name, args):
    out = open(os.path.join(WORK, name + ".out"), "w")
    err = open(os.path.join(WORK, name + ".err"), "w")
    p = subprocess.Popen([BIN] + args, cwd=WORK, env=ENV, stdout=out, stderr=err,
                         start_new_session=True)
    p.name = name
    PROCS.append(p)
    return p


def stop_all():
    for p in PROCS:
        stop(p, signal.SIGKILL)


def printed(p, pattern, limit=300):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if p.poll() is not None:
            sys.exit(f"dashboard: {p.name} exited {p.returncode}: "
                     f"{open(os.path.join(WORK, p.name + '.err')).read()[-1500:]}")
        with open(os.path.join(WORK, p.name + ".out")) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        time.sleep(0.1)
    sys.exit(f"dashboard: {p.name} printed no {pattern}")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def get(conn, path, headers=None):
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read()


def post(port, path, body=b"{}", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


class stream_reader(threading.Thread):
    """One page: reads the event stream until told to stop."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.states, self.running = port, 0, True
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())

    def run(self):
        while self.running:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.states += data.count(b"event: state")

    def close(self):
        self.running = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def wait_training(port, limit=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            s, body = get(c, "/api/state")
            st = json.loads(body)
            if st.get("job") and st["job"]["phase"] == "training":
                return st
        except (OSError, ValueError, http.client.HTTPException):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        time.sleep(0.5)
    sys.exit("dashboard: the 32-node job did not start training")


def state_and_cpu():
    n = 32
    nodes = []
    cluster = ""
    for i in range(1, n + 1):
        nodes.append(start(f"node{i}", ["node", "--name", f"node{i}", "--listen", "127.0.0.1:0"]))
    for i, p in enumerate(nodes, 1):
        port = printed(p, r"listening on 127\.0\.0\.1:(\d+)").group(1)
        cluster += f'[[node]]\nname = "node{i}"\naddress = "127.0.0.1:{port}"\n\n'
    with open(os.path.join(WORK, "cluster.toml"), "w") as f:
        f.write(cluster)
    sup = start("supervisor", ["supervisor", "--cluster", "cluster.toml", "--model", "cnn",
                               "--epochs", "1000", "--dashboard", "127.0.0.1:0",
                               "--metrics", "none"])
    port = int(printed(sup, r"dashboard: http://127\.0\.0\.1:(\d+)/").group(1))
    st = wait_training(port)
    if len(st["nodes"]) != n:
        sys.exit(f"dashboard: the state lists {len(st['nodes'])} nodes, not {n}")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for _ in range(300):
        t0 = time.perf_counter()
        s, body = get(c, "/api/state")
        times.append((time.perf_counter() - t0) * 1e3)
        if s != 200:
            sys.exit(f"dashboard: /api/state answered {s}")
    times.sort()
    state_ms = statistics.median(times)
    state_p99 = times[int(0.99 * len(times)) - 1]
    state_bytes = len(body)
    # pause the job: the windows below measure the pages, not the training
    csrf = json.loads(get(c, "/api/session")[1])["csrf"]
    auth = {"Authorization": "Bearer " + SECRET, "X-Salamander-Token": csrf}
    s, body = post(port, "/api/actions/pause", headers=auth)
    if s != 200:
        sys.exit(f"dashboard: pause answered {s}: {body!r}")
    time.sleep(3)  # the batches in flight finish
    window = 6 if QUICK else 15
    rounds = 2 if QUICK else 4
    rises, none_pct, ten_pct = [], [], []
    for _ in range(rounds):
        a = cpu_s(sup.pid)
        time.sleep(window)
        idle = (cpu_s(sup.pid) - a) / window * 100
        pages = [stream_reader(port) for _ in range(10)]
        for p in pages:
            p.start()
        time.sleep(1)
        a = cpu_s(sup.pid)
        time.sleep(window)
        busy = (cpu_s(sup.pid) - a) / window * 100
        delivered = min(p.states for p in pages)
        for p in pages:
            p.close()
        if delivered < window - 2:
            sys.exit(f"dashboard: a page got {delivered} states in {window} s")
        none_pct.append(idle)
        ten_pct.append(busy)
        rises.append(busy - idle)
    stop(sup, signal.SIGKILL)
    for p in nodes:
        stop(p, signal.SIGKILL)
    return {"nodes": n, "state_ms_median": state_ms, "state_ms_p99": state_p99,
            "state_bytes": state_bytes, "cpu_window_s": window,
            "cpu_pct_no_page": none_pct, "cpu_pct_10_pages": ten_pct,
            "cpu_rise_pct": rises, "cpu_rise_pct_median": statistics.median(rises)}


def throughput(dashboard, batches):
    args = ["train", "--stages", "2", "--model", "cnn", "--epochs", "1", "--max-batches",
            str(batches), "--metrics", "none"]
    if dashboard:
        args += ["--dashboard", "127.0.0.1:0"]
    p = start("train-" + ("on" if dashboard else "off"), args)
    page = None
    if dashboard:
        port = int(printed(p, r"dashboard: http://127\.0\.0\.1:(\d+)/").group(1))
        page = stream_reader(port)
        page.start()
    p.wait()
    if page:
        page.close()
    out = open(os.path.join(WORK, p.name + ".out")).read()
    m = re.search(r"throughput: ([0-9.]+) samples/s", out)
    if p.returncode != 0 or not m:
        sys.exit(f"dashboard: train exited {p.returncode}: {out[-500:]}")
    return float(m.group(1))


def main():
    began = time.monotonic()
    try:
        sc = state_and_cpu()
        pairs = 5 if QUICK else 11
        batches = 300 if QUICK else 600
        on, off, ratios = [], [], []
        for i in range(pairs):
            # alternate which goes first: a drifting host favours neither
            if i % 2 == 0:
                b, a = throughput(False, batches), throughput(True, batches)
            else:
                a, b = throughput(True, batches), throughput(False, batches)
            on.append(a)
            off.append(b)
            ratios.append(a / b)
    finally:
        stop_all()
    result = {
        "benchmark": "dashboard",
        "quick": QUICK,
        "devices": "32 node processes on one host, not emulated; training: 2 embedded stages",
        "state_and_cpu": sc,
        "train": {"batches": batches, "samples_per_s_on": on, "samples_per_s_off": off,
                  "ratios": ratios, "one_page_reading_the_stream": True},
        "wall_s": time.monotonic() - began,
        "headlines": {
            "dashboard_state_ms_32_nodes": sc["state_ms_median"],
            "dashboard_cpu_pct_10_pages": sc["cpu_rise_pct_median"],
            "dashboard_train_throughput_ratio": statistics.median(ratios),
        },
        "goals": {
            "dashboard_state_ms_32_nodes": "<= 5",
            "dashboard_cpu_pct_10_pages": "<= 1",
            "dashboard_train_throughput_ratio": ">= 0.99",
        },
    }
    with open(OUT, "w") as f:
        json.dump(result, f, indent=2)
    print(f"results: {OUT}")
    print(f"/api/state with 32 nodes: median {sc['state_ms_median']:.3f} ms, p99 "
          f"{sc['state_ms_p99']:.3f} ms ({sc['state_bytes']} bytes)")
    print(f"supervisor CPU, job paused: {statistics.median(sc['cpu_pct_no_page']):.2f}% of a core "
          f"without pages, {statistics.median(sc['cpu_pct_10_pages']):.2f}% with 10 "
          f"(rises {', '.join(f'{x:.2f}' for x in sc['cpu_rise_pct'])})")
    print(f"training with the dashboard and a page over without: "
          f"{', '.join(f'{x:.3f}' for x in ratios)}")
    for k, v in result["headlines"].items():
        print(f"{k}: {v:.3f}")


if __name__ == "__main__":
    main()
