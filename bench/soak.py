#!/usr/bin/env python3
"""bench/run.sh soak (training) and soak_serve (serving): a job through failures
that arrive at a rate (issue 32, item 1).

A training job (the CNN on synthetic data, an even 4-stage pipeline) runs on
4 `salamander node` processes on one host, EMULATED devices (each 0.45 of a
core by compute-time dilation), for --minutes. A failure process draws
inter-arrival times from an exponential distribution (mean --mean-s) and,
at each arrival, draws one kind from a shuffled bag (every kind comes once in
each turn of the bag: three kill -9s, two each of SIGSTOP, slow and cut, one
supervisor kill):

  kill9       kill -9 of a node, started again on its port 3 s later
  stop        SIGSTOP of a node, SIGCONT 6 s later (past the 3 s hang timeout)
  slow        the node's emulated speed cut to 0.2 for 15 s (console `slow node`)
  cut         the node's link silent for 8 s (console `cut node`: its network
              loop stalls, EMULATED; connections kept, the process runs on)
  supervisor  kill -9 of the supervisor, `supervisor --resume RUN_DIR` 2 s later

Node n1 is never a target, so that one node lives through the whole run.
A failure waits for the one before it to be over (its node back, a batch
committed after it). --kinds a,b picks among some kinds only.

The job's length is set first: a fault-free calibration job on the same
nodes measures their rate, and the soak job gets the whole epochs that rate
fits into --minutes. Failures stop at --minutes (or when the job ends) and
the job then finishes by itself; its saved weights are compared with a
fault-free replay of the same epochs on one device (`train`, the same seed):
soak_train_exact is 1 when every weight is equal to 1e-5. The last metrics log is audited (every batch once). Every 10 s until the job ends the
RSS and open descriptors of each node and of the supervisor are sampled.

Headlines: soak_train_failures, soak_train_exact, soak_node_rss_growth (the
largest RSS growth of a node alive from the 5th minute to the end, as a
fraction), soak_recovery_p50_s, soak_recovery_p99_s.

--mode serve: `salamander serve` of the CNN (seed weights) over the same 4
EMULATED nodes, planned by profile, under `hey -c 16` (one image a request,
JSON, kept-alive connections) in back-to-back chunks of 60 s with -o csv, so
every answered request's start and latency is kept. First --baseline-minutes
without failures, then --minutes with them (kinds kill9, stop, slow, cut: a
kill -9 of `serve` itself is the HTTP server's own death, which no request in
flight survives, so it is not drawn). hey's CSV leaves out requests that got
no answer at all, so each chunk is checked against the server's own count
(/v2/models/NAME/stats, success and fail) read before and after it:
requests lost = answers other than 200 + answers the server gave that the
client never got. A failure window runs from the failure to 2 s after its node
is healthy again (and back to speed); soak_serve_p99_ratio is the p99 latency
of the requests that started outside every window over the fault-free p99.
Headlines: soak_serve_failures, soak_serve_requests, soak_serve_requests_lost,
soak_serve_p99_ratio, soak_node_rss_growth, soak_supervisor_rss_growth.

--mode federate | split: a federated (FedAvg) or split-learning job of the
CNN on synthetic IID shards: federated, 250 virtual clients on each of the 4
nodes (1,000) with 10% of them drawn each round; split, 5 on each node; sized
by a fault-free calibration of 3 rounds to fill --minutes (default 20), with
every failure kind; the supervisor is killed and started again with the same
command and --resume (its checkpoint is written every round). At the end
every round from 1 to the last must have been logged as completed in one of
the job's metrics logs. Headlines: soak_fed_failures / soak_split_failures,
soak_fed_rounds / soak_split_rounds (completed), soak_fed_rounds_missing /
soak_split_rounds_missing, soak_fed_job_ok / soak_split_job_ok (1 when the
job ended with exit 0), and the memory figures.

Usage: soak.py SALAMANDER_BIN OUT_JSON [--mode train|serve|federate|split] [--quick] [--minutes M]
              [--mean-s S] [--seed N] [--kinds kill9,stop,slow,cut,supervisor]
              [--baseline-minutes B]
"""
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from array import array

from benchprocs import stop

BIN, OUT = os.path.abspath(sys.argv[1]), sys.argv[2]
opts = sys.argv[3:]
QUICK = "--quick" in opts
MODE = (opts[opts.index("--mode") + 1:][:1] or ["train"])[0] if "--mode" in opts else "train"
SERVE = MODE == "serve"
ROUNDS = MODE in ("federate", "split")
if SERVE:  # the 30 minutes of serving
    MINUTES, MEAN_S, SEED = (3.0, 20.0, 1) if QUICK else (30.0, 60.0, 1)
elif ROUNDS:
    MINUTES, MEAN_S, SEED = (4.0, 20.0, 1) if QUICK else (20.0, 60.0, 1)
else:
    MINUTES, MEAN_S, SEED = (4.0, 20.0, 1) if QUICK else (60.0, 60.0, 1)
BASELINE_MINUTES = 1.0 if QUICK else 5.0
# how often each kind is drawn, relative to the others
ALL_KINDS = {"kill9": 3, "stop": 2, "slow": 2, "cut": 2, "supervisor": 1}
WEIGHTS = {k: w for k, w in ALL_KINDS.items() if not (SERVE and k == "supervisor")}
i = 0
while i < len(opts):
    a = opts[i]
    if a == "--quick":
        i += 1
    elif a == "--kinds" and i + 1 < len(opts):
        wanted = opts[i + 1].split(",")
        unknown = [k for k in wanted if k not in ALL_KINDS]
        if unknown or not wanted:
            sys.exit(f"soak: unknown failure kind(s) {','.join(unknown)} "
                     f"(kinds: {','.join(ALL_KINDS)})")
        WEIGHTS = {k: w for k, w in ALL_KINDS.items() if k in wanted}
        i += 2
    elif a == "--mode" and i + 1 < len(opts):
        if opts[i + 1] not in ("train", "serve", "federate", "split"):
            sys.exit(f"soak: --mode is train, serve, federate or split, not '{opts[i + 1]}'")
        i += 2
    elif a in ("--minutes", "--mean-s", "--seed", "--baseline-minutes") and i + 1 < len(opts):
        v = opts[i + 1]
        try:
            if a == "--minutes":
                MINUTES = float(v)
            elif a == "--baseline-minutes":
                BASELINE_MINUTES = float(v)
            elif a == "--mean-s":
                MEAN_S = float(v)
            else:
                SEED = int(v)
        except ValueError:
            sys.exit(f"soak: {a} takes a number, got '{v}'")
        i += 2
    else:
        sys.exit(f"soak: unknown option {a} (--mode train|serve|federate|split, --quick, --minutes M, "
                 "--mean-s S, --seed N, --kinds a,b, --baseline-minutes B)")
if MINUTES <= 0 or MEAN_S <= 0 or BASELINE_MINUTES <= 0:
    sys.exit("soak: --minutes, --mean-s and --baseline-minutes must be more than 0")
if SERVE and "supervisor" in WEIGHTS:
    sys.exit("soak: --mode serve does not draw 'supervisor': its kill is the HTTP server's "
             "death, which no request in flight survives")

WORK = tempfile.mkdtemp(prefix="salamander-soak-")
RUN = os.path.join(WORK, "run")
SECRET = os.urandom(8).hex()
ENV = dict(os.environ, SALAMANDER_SECRET=SECRET, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
ENV.pop("SALAMANDER_TLS", None)
PY = "/usr/bin/python3"  # Debian's, with python3-torch
NODES = ["n1", "n2", "n3", "n4"]
SPARED = "n1"
JOB = ["--model", "cnn", "--dataset", "synthetic", "--batch-size", "64",
       "--micro-batches", "4", "--replicate-every", "5", "--threads", "1"]
ON_NODES = ["--plan", "even", "--hang-timeout", "3"]
procs = {}   # name -> Popen (nodes and "supervisor")
ports = {}   # node -> port
lock = threading.Lock()
rng = random.Random(SEED)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def start(name, args):
    out = open(os.path.join(WORK, name + ".out"), "a")
    err = open(os.path.join(WORK, name + ".err"), "a")
    p = subprocess.Popen([BIN] + args, cwd=WORK, env=ENV, stdout=out, stderr=err,
                         start_new_session=True)
    with lock:
        procs[name] = p
    return p


def kill(p, sig=signal.SIGKILL):
    if p:
        stop(p, sig)


def start_node(name):
    port = ports.get(name, 0)
    p = start(name, ["--log-level", "warn", "node", "--name", name, "--listen",
                     f"127.0.0.1:{port}", "--supervisor-grace", "600", "--cpu-share", "0.45",
                     "--dilate", "--threads", "1"])
    if port == 0:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            with open(os.path.join(WORK, name + ".out")) as f:
                m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
            if m:
                ports[name] = int(m.group(1))
                break
            if p.poll() is not None:
                sys.exit(f"soak: node {name} exited at start")
            time.sleep(0.1)
        else:
            sys.exit(f"soak: node {name} printed no port")
    return p


def metrics_file():
    """The metrics log the running supervisor writes (the newest)."""
    names = [n for n in os.listdir(RUN) if n.startswith("metrics") and n.endswith(".jsonl")] \
        if os.path.isdir(RUN) else []
    if not names:
        return None
    return max((os.path.join(RUN, n) for n in names), key=os.path.getmtime)


# the event that shows the job moving on: a committed batch, or a round
PROGRESS = '"event":"round"' if ROUNDS else '"event":"batch"'


def progress_count(path):
    """How many PROGRESS events the metrics log at `path` holds."""
    if not path or not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for line in f if PROGRESS in line)


def wait_progress_after(path_before, count_before, limit):
    """Seconds until a PROGRESS event comes after (path, count); None past `limit`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        path = metrics_file()
        n = progress_count(path)
        if (path != path_before and n > 0) or (path == path_before and n > count_before):
            return time.monotonic() - t0
        sup = procs.get("supervisor")
        if sup and sup.poll() is not None:
            if sup.returncode == 0:
                return time.monotonic() - t0  # the job finished meanwhile
            raise RuntimeError(f"the supervisor exited ({sup.returncode}): "
                               + open(os.path.join(WORK, "supervisor.err")).read()[-1500:])
        time.sleep(0.05)
    return None


def sample_forever(samples, stop_event, started):
    while not stop_event.wait(10):
        with lock:
            live = {n: p for n, p in procs.items() if p.poll() is None}
        for name, p in live.items():
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
                fds = len(os.listdir(f"/proc/{p.pid}/fd"))
            except (OSError, AttributeError):
                continue
            samples.append({"t": time.monotonic() - started, "name": name, "pid": p.pid,
                            "rss_mb": rss / 1024, "fds": fds})


def console(cmd):
    r = subprocess.run([BIN, "--log-level", "warn", "console", f"127.0.0.1:{SUP_PORT}",
                        "--timeout", "10", "--exec", cmd], env=ENV, cwd=WORK,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        log(f"  console '{cmd}' failed ({r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}")
    return r.stdout if r.returncode == 0 else ""


def wait_live(name, limit=180):
    """Waits until the supervisor counts node `name` healthy; False past `limit`,
    or at once when the supervisor has exited (the job ended)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        sup = procs.get("supervisor")
        if sup and sup.poll() is not None:
            return False
        for line in console("nodes").splitlines():
            words = line.split()
            if len(words) > 1 and words[0] == name and words[1] == "ok":
                return True
        time.sleep(0.5)
    return False


# How long each failure lasts before it is undone (the node started again,
# woken, or back to its speed); the supervisor's outage is inside inflict().
LASTS = {"kill9": 3.0, "stop": 6.0, "slow": 15.0, "cut": 8.0, "supervisor": 0.0}


def inflict(kind, target):
    if kind == "kill9":
        kill(procs[target], signal.SIGKILL)
    elif kind == "stop":
        os.killpg(procs[target].pid, signal.SIGSTOP)
    elif kind == "slow":
        console(f"slow node {target} 0.2")
    elif kind == "cut":  # it ends by itself
        console(f"cut node {target} {LASTS['cut']:g}")
    elif kind == "supervisor":
        kill(procs["supervisor"], signal.SIGKILL)
        time.sleep(2)
        restart_supervisor()


def restart_supervisor():
    """After a kill -9: the training job goes on with `supervisor --resume`; a
    federated or split job with its own command and --resume (rounds_command)."""
    if ROUNDS:
        restarts[0] += 1
        start("supervisor", rounds_command(restarts[0]) + ["--resume"])
    else:
        start("supervisor", ["supervisor", "--resume", RUN])


restarts = [0]


def undo(kind, target):
    if kind == "kill9":
        start_node(target)
    elif kind == "stop":
        os.killpg(procs[target].pid, signal.SIGCONT)
    elif kind == "slow":
        console(f"slow node {target} 1")


def free_port():
    """deploy/free_port.sh's choice: a free port below the ephemeral range."""
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy",
                          "free_port.sh")
    out = subprocess.run(["bash", "-c", f'. "{helper}" && free_port'], capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit("soak: " + out.stderr.strip())
    return int(out.stdout)


def start_nodes():
    for n in NODES:
        start_node(n)
    with open(os.path.join(WORK, "c.toml"), "w") as f:
        for n in NODES:
            f.write(f'[[node]]\nname = "{n}"\naddress = "127.0.0.1:{ports[n]}"\n\n')


def failure_loop(started, duration, alive, before, recovered, settle):
    """Failures at exponential gaps (mean MEAN_S) from `started` until `duration`
    or until alive() is false, one at a time. For each: before() marks the job's
    state, recovered(mark, t0) measures the way back (a dict for the record),
    settle(kind, target, rec) waits until the next failure may come."""
    # kinds drawn from a shuffled bag of their weights, refilled when empty:
    # every kind comes in each turn of the bag, however short the run
    bag = []
    failures = []
    next_at = rng.expovariate(1 / MEAN_S)
    while alive():
        now = time.monotonic() - started
        if next_at >= duration:
            break
        if now < next_at:
            time.sleep(min(next_at - now, 1.0))
            continue
        if not bag:
            bag = [k for k, w in WEIGHTS.items() for _ in range(w)]
            rng.shuffle(bag)
        kind = bag.pop()
        target = "supervisor" if kind == "supervisor" else rng.choice(NODES[1:])
        if target != "supervisor" and not wait_live(target):
            if not alive():
                break  # the job ended meanwhile
            log(f"  node {target} is not back 3 minutes after its last failure")
            failures.append({"kind": kind, "target": target, "error": "not back"})
            break
        mark = before()
        at = time.monotonic() - started
        log(f"failure {len(failures) + 1}: {kind} {target} at {at:.0f} s")
        t0 = time.monotonic()
        inflict(kind, target)
        rec = {"kind": kind, "target": target, "at_s": at, "scheduled_s": next_at}
        rec.update(recovered(mark, t0))
        time.sleep(max(0.0, LASTS[kind] - (time.monotonic() - t0)))
        undo(kind, target)
        settle(kind, target, rec)
        rec["end_s"] = time.monotonic() - started
        failures.append(rec)
        next_at += rng.expovariate(1 / MEAN_S)
    return failures


def progress_after(mark, t0, what):
    """From the failure (at t0) to the first PROGRESS event after `mark`, as a
    record's next_{what}_s (or an error past 10 minutes)."""
    done = wait_progress_after(mark[0], mark[1], 600)
    key = f"next_{what}_s"
    rec = {key: None if done is None else (time.monotonic() - t0)}
    if done is None:
        rec["error"] = f"no {what} completed within 10 minutes"
    log(f"  next {what} {rec[key] and round(rec[key], 2)} s after the failure began")
    return rec


def memory_growth(samples, duration):
    """RSS growth and first/last descriptors of each process alive from the 5th
    minute (or the 12th of the run, if shorter) to the end."""
    from_t = min(300.0, duration / 12)
    growth, fds = {}, {}
    for name in NODES + ["supervisor"]:
        mine = [s for s in samples if s["name"] == name]
        if not mine:
            continue
        last_pid = mine[-1]["pid"]
        life = [s for s in mine if s["pid"] == last_pid]
        base = [s for s in life if s["t"] >= from_t]
        if life[0]["t"] <= from_t + 10 and base:
            growth[name] = base[-1]["rss_mb"] / base[0]["rss_mb"] - 1
            fds[name] = [base[0]["fds"], base[-1]["fds"]]
    return growth, fds, from_t


def sampling(started):
    samples, stop_event = [], threading.Event()
    t = threading.Thread(target=sample_forever, args=(samples, stop_event, started))
    t.start()

    def finish():
        stop_event.set()
        t.join()
    return samples, finish


def print_memory(growth, fds, from_t):
    print(f"RSS growth from minute {from_t / 60:g}: "
          + ", ".join(f"{n} {100 * g:+.1f}%" for n, g in growth.items())
          + "; descriptors " + ", ".join(f"{n} {a}->{b}" for n, (a, b) in fds.items()))


def write_results(result, headlines, summary, growth, fds, from_t):
    """The memory headlines added, the JSON written, the summary line and the
    headlines printed (last, one `key: value` a line)."""
    headlines["soak_node_rss_growth"] = max(
        (g for n, g in growth.items() if n != "supervisor"), default=None)
    headlines["soak_supervisor_rss_growth"] = growth.get("supervisor")
    result["headlines"] = headlines
    with open(OUT, "w") as f:
        json.dump(result, f, indent=2)
    print(f"results: {OUT}")
    print(summary)
    print_memory(growth, fds, from_t)
    print_headlines(headlines)


def print_headlines(headlines):
    for k, v in headlines.items():
        print(f"{k}: {'n/a' if v is None else (f'{v:.4f}' if isinstance(v, float) else v)}")


def soak_train():
    global SUP_PORT
    began = time.monotonic()
    SUP_PORT = free_port()
    start_nodes()
    # calibration: the nodes' fault-free rate, to size the soak job
    cal = subprocess.run([BIN, "--log-level", "warn", "supervisor", "--cluster", "c.toml"] + JOB +
                         ON_NODES + ["--epochs", "1", "--metrics", "cal.jsonl"], env=ENV,
                         cwd=WORK, capture_output=True,
                         text=True)
    if cal.returncode != 0:
        raise RuntimeError("the calibration job failed: " + cal.stderr[-1500:])
    with open(os.path.join(WORK, "cal.jsonl")) as f:
        events = [json.loads(line) for line in f]
    per_epoch = next(e["batches_per_epoch"] for e in events if e["event"] == "start")
    ts = [e["t"] for e in events if e["event"] == "batch"][5:]
    rate = (len(ts) - 1) / (ts[-1] - ts[0])
    epochs = max(1, round(rate * MINUTES * 60 / per_epoch))
    log(f"calibration: {rate:.1f} batches/s fault-free; the soak job trains {epochs} epochs "
        f"of {per_epoch} batches")
    start("supervisor", ["supervisor", "--cluster", "c.toml"] + JOB + ON_NODES +
          ["--epochs", str(epochs), "--save", "soak.ckpt", "--metrics",
           os.path.join(RUN, "metrics.jsonl"), "--listen", f"127.0.0.1:{SUP_PORT}"])
    if wait_progress_after(None, 0, 600) is None:
        raise RuntimeError("the job committed no batch in 10 minutes")
    started = time.monotonic()
    samples, stop_sampling = sampling(started)
    duration = MINUTES * 60

    def settle(kind, target, rec):
        # the next failure finds the job training with its node back
        wait_progress_after(metrics_file(), progress_count(metrics_file()), 600)

    # memory is sampled until the job ends, not only while failures come (a
    # supervisor killed and started again is a new process: looked up anew)
    try:
        failures = failure_loop(started, duration, lambda: procs["supervisor"].poll() is None,
                                lambda: (metrics_file(), progress_count(metrics_file())),
                                lambda mark, t0: progress_after(mark, t0, "batch"), settle)
        # no more failures: the job finishes by itself
        procs["supervisor"].wait(timeout=6 * 3600)
    finally:
        stop_sampling()
    sup = procs["supervisor"]
    if sup.returncode != 0:
        raise RuntimeError(f"the soak job failed ({sup.returncode}): "
                           + open(os.path.join(WORK, "supervisor.err")).read()[-1500:])
    committed = epochs * per_epoch
    last_log = metrics_file()
    audit = subprocess.run([BIN, "audit", last_log], env=ENV, cwd=WORK, capture_output=True,
                           text=True)
    for n in NODES:
        kill(procs[n], signal.SIGTERM)
    # the fault-free replay of the same batches, on one device
    ref = subprocess.run([BIN, "--log-level", "warn", "train"] + JOB +
                         ["--epochs", str(epochs), "--save", "ref.ckpt", "--metrics", "none"],
                         env=ENV, cwd=WORK, capture_output=True, text=True)
    if ref.returncode != 0:
        raise RuntimeError("the fault-free replay failed: " + ref.stderr[-1500:])
    for c in ("soak", "ref"):
        subprocess.run([BIN, "--log-level", "warn", "export", "--load", f"{c}.ckpt", "-o",
                        f"{c}.pt"], env=ENV, cwd=WORK, check=True, capture_output=True)
    diff = subprocess.run([PY, "-c", (
        "import sys, torch\n"
        "a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
        "assert a.keys() == b.keys()\n"
        "print(max(float((a[k].double() - b[k].double()).abs().max()) for k in a))\n"),
        "soak.pt", "ref.pt"], cwd=WORK, capture_output=True, text=True)
    worst = float(diff.stdout.strip()) if diff.returncode == 0 else float("inf")

    growth, fds, from_t = memory_growth(samples, duration)
    rec_s = sorted(f["next_batch_s"] for f in failures
                   if f.get("next_batch_s") is not None and f["kind"] != "slow")
    unrecovered = [f for f in failures if "error" in f]
    p50 = statistics.median(rec_s) if rec_s else None
    p99 = rec_s[min(len(rec_s) - 1, int(round(0.99 * (len(rec_s) - 1))))] if rec_s else None
    by_kind = {k: sum(1 for f in failures if f["kind"] == k) for k in WEIGHTS}
    result = {
        "benchmark": "soak",
        "quick": QUICK,
        "devices": "4 node processes on one host, EMULATED (0.45 of a core each, compute-time "
                   "dilation), loopback; the supervisor in its own process",
        "minutes": MINUTES, "mean_failure_s": MEAN_S, "seed": SEED,
        "job": " ".join(JOB),
        "failures": failures, "failures_by_kind": by_kind,
        "failures_unrecovered": len(unrecovered),
        "committed_batches": committed, "epochs": epochs, "calibration_batches_per_s": rate,
        "audit_ok": audit.returncode == 0, "audit": audit.stdout[-2000:],
        "max_weight_diff": worst,
        "rss_growth": growth, "fds_first_last": fds, "rss_from_s": from_t,
        "samples": samples,
        "wall_s": time.monotonic() - began,
        "not_done": "federated and split soaks",
    }
    headlines = {
        "soak_train_failures": len(failures),
        "soak_train_exact": 1 if worst <= 1e-5 and audit.returncode == 0 else 0,
        "soak_recovery_p50_s": p50,
        "soak_recovery_p99_s": p99,
    }
    write_results(result, headlines,
                  f"{len(failures)} failures in {MINUTES:g} min ({by_kind}, {len(unrecovered)} "
                  f"not recovered from); {committed} batches; audit "
                  f"{'ok' if audit.returncode == 0 else 'FAILED'}; max |weight difference| "
                  f"against the fault-free replay {worst:.2e}", growth, fds, from_t)


# ---- federated and split learning

# federated: the 1,000 clients on 4 nodes, 10% of them drawn each
# round; split: 5 clients a node, every one each round
ROUND_JOB = (["--model", "cnn", "--dataset", "synthetic", "--iid", "--max-samples", "128",
              "--batch-size", "32", "--threads", "1", "--hang-timeout", "3",
              "--test-samples", "500"] +
             (["--clients-per-node", "250", "--fraction-fit", "0.1"] if MODE == "federate"
              else ["--clients-per-node", "5"]))
ROUNDS_TOTAL = [0]


def rounds_command(restart):
    """The job's command; each start of the supervisor writes its own log."""
    return (["--log-level", "warn", MODE, "--cluster", "c.toml"] + ROUND_JOB +
            ["--rounds", str(ROUNDS_TOTAL[0]), "--checkpoint", os.path.join(RUN, "job.ckpt"),
             "--metrics", os.path.join(RUN, f"metrics-{restart}.jsonl"),
             "--listen", f"127.0.0.1:{SUP_PORT}"])


def round_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if '"event":"round' in line]


def soak_rounds():
    global SUP_PORT
    began = time.monotonic()
    SUP_PORT = free_port()
    start_nodes()
    os.makedirs(RUN, exist_ok=True)
    # calibration: two fault-free rounds, to size the job
    cal = subprocess.run([BIN, "--log-level", "warn", MODE, "--cluster", "c.toml"] + ROUND_JOB +
                         ["--rounds", "3", "--metrics", "cal.jsonl"], env=ENV, cwd=WORK,
                         capture_output=True, text=True)
    if cal.returncode != 0:
        raise RuntimeError("the calibration job failed: " + cal.stderr[-1500:])
    ts = [e["t"] for e in round_events(os.path.join(WORK, "cal.jsonl")) if e["event"] == "round"]
    per_round = (ts[-1] - ts[0]) / (len(ts) - 1)
    ROUNDS_TOTAL[0] = max(3, round(MINUTES * 60 / per_round))
    log(f"calibration: {per_round:.1f} s a round fault-free; the soak job runs "
        f"{ROUNDS_TOTAL[0]} rounds")
    start("supervisor", rounds_command(0))
    if wait_progress_after(None, 0, 600) is None:
        raise RuntimeError("the job completed no round in 10 minutes")
    started = time.monotonic()
    samples, stop_sampling = sampling(started)
    duration = MINUTES * 60

    def settle(kind, target, rec):
        if (target != "supervisor" and not wait_live(target)
                and procs["supervisor"].poll() is None):
            rec["error"] = "not back within 3 minutes"

    # memory is sampled until the job ends, not only while failures come (a
    # supervisor killed and started again is a new process: looked up anew)
    try:
        failures = failure_loop(started, duration, lambda: procs["supervisor"].poll() is None,
                                lambda: (metrics_file(), progress_count(metrics_file())),
                                lambda mark, t0: progress_after(mark, t0, "round"), settle)
        # no more failures: the job finishes by itself
        procs["supervisor"].wait(timeout=6 * 3600)
    finally:
        stop_sampling()
    sup = procs["supervisor"]
    for n in NODES:
        kill(procs[n], signal.SIGTERM)
    logs = sorted(os.path.join(RUN, n) for n in os.listdir(RUN)
                  if n.startswith("metrics-") and n.endswith(".jsonl"))
    done, void = set(), 0
    for path in logs:
        for e in round_events(path):
            if e["event"] == "round":
                done.add(e["round"])
            elif e["event"] == "round_void":
                void += 1
    missing = [r for r in range(1, ROUNDS_TOTAL[0] + 1) if r not in done]
    unrecovered = [f for f in failures if "error" in f]
    growth, fds, from_t = memory_growth(samples, duration)
    by_kind = {k: sum(1 for f in failures if f["kind"] == k) for k in WEIGHTS}
    key = "fed" if MODE == "federate" else "split"
    result = {
        "benchmark": f"soak_{key}",
        "quick": QUICK,
        "devices": "4 node processes on one host, EMULATED (0.45 of a core each, compute-time "
                   "dilation), loopback; the supervisor in its own process",
        "minutes": MINUTES, "mean_failure_s": MEAN_S, "seed": SEED,
        "job": " ".join([MODE] + ROUND_JOB), "rounds": ROUNDS_TOTAL[0],
        "calibration_s_per_round": per_round,
        "exit_code": sup.returncode, "metrics_logs": [os.path.basename(p) for p in logs],
        "failures": failures, "failures_by_kind": by_kind,
        "failures_unrecovered": len(unrecovered),
        "rounds_completed": len(done), "rounds_missing": missing, "rounds_void": void,
        "rss_growth": growth, "fds_first_last": fds, "rss_from_s": from_t,
        "samples": samples, "wall_s": time.monotonic() - began,
    }
    headlines = {
        f"soak_{key}_failures": len(failures),
        f"soak_{key}_rounds": len(done),
        f"soak_{key}_rounds_missing": len(missing),
        f"soak_{key}_job_ok": 1 if sup.returncode == 0 else 0,
    }
    write_results(result, headlines,
                  f"{len(failures)} failures in {MINUTES:g} min ({by_kind}, {len(unrecovered)} "
                  f"not recovered from); {MODE} job exit {sup.returncode}; rounds completed "
                  f"{len(done)} of {ROUNDS_TOTAL[0]} (missing {missing or 'none'}; {void} void) "
                  f"over {len(logs)} supervisor start(s)", growth, fds, from_t)


# ---- serving

CONNECTIONS = 16
CHUNK_S = 60.0


def serve_stats(url):
    """The server's own count of answered requests: (success, fail)."""
    with urllib.request.urlopen(url + "/v2/models/cnn/stats", timeout=30) as r:
        st = json.load(r)["model_stats"][0]["inference_stats"]
    return st["success"]["count"], st["fail"]["count"]


def hey_chunk(url, body, seconds):
    """`hey -c 16` for `seconds`, every answer kept (start, latency) and checked
    against the server's count."""
    s0 = serve_stats(url)
    t0 = time.monotonic()
    r = subprocess.run(["hey", "-z", f"{seconds:.1f}s", "-c", str(CONNECTIONS), "-m", "POST",
                        "-T", "application/json", "-D", body, "-o", "csv",
                        url + "/v2/models/cnn/infer"], capture_output=True, text=True)
    s1 = serve_stats(url)
    out = {"t0": t0, "rc": r.returncode, "ok": 0, "other": 0,
           "server_success": s1[0] - s0[0], "server_fail": s1[1] - s0[1],
           "starts": array("d"), "latencies": array("d")}
    for line in r.stdout.splitlines()[1:]:
        f = line.split(",")
        if len(f) < 8:
            continue
        if f[6] == "200":
            out["ok"] += 1
            out["starts"].append(t0 + float(f[7]))
            out["latencies"].append(float(f[0]))
        else:
            out["other"] += 1
    return out


def chunks_for(url, body, seconds, stop_event=None):
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end - 1 and not (stop_event and stop_event.is_set()):
        out.append(hey_chunk(url, body, min(CHUNK_S, end - time.monotonic())))
    return out


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))] if v else None


def lost_in(chunks):
    """Answers other than 200, and answers the server gave that hey never got."""
    return sum(c["other"] + max(0, c["server_success"] - c["ok"]) for c in chunks)


def soak_serve():
    global SUP_PORT
    began = time.monotonic()
    SUP_PORT = free_port()
    http_port = free_port()
    start_nodes()
    os.makedirs(RUN, exist_ok=True)
    start("supervisor", ["--log-level", "warn", "serve", "--cluster", "c.toml", "--model", "cnn",
                         "--threads", "1", "--hang-timeout", "3", "--listen",
                         f"127.0.0.1:{http_port}", "--supervisor-listen",
                         f"127.0.0.1:{SUP_PORT}", "--metrics",
                         os.path.join(RUN, "metrics.jsonl")])
    url = f"http://127.0.0.1:{http_port}"
    end = time.monotonic() + 600
    while True:
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if procs["supervisor"].poll() is not None or time.monotonic() > end:
            raise RuntimeError("serve did not become ready: "
                               + open(os.path.join(WORK, "supervisor.err")).read()[-1500:])
        time.sleep(0.5)
    body = os.path.join(WORK, "request.json")
    img = [[[1.0 if 8 <= r < 20 and 8 <= c < 20 else 0.0 for c in range(28)] for r in range(28)]]
    with open(body, "w") as f:
        json.dump({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32",
                               "data": [img]}]}, f)
    log(f"serving at {url}; {BASELINE_MINUTES:g} min of load without failures")
    base = chunks_for(url, body, BASELINE_MINUTES * 60)
    base_p99 = p99([x for c in base for x in c["latencies"]])
    log(f"fault-free: {sum(c['ok'] for c in base)} answered, p99 "
        f"{base_p99 and base_p99 * 1e3:.1f} ms; now {MINUTES:g} min with failures")

    started = time.monotonic()
    samples, stop_sampling = sampling(started)
    duration = MINUTES * 60
    load_done = threading.Event()
    soak_chunks = []
    loader = threading.Thread(target=lambda: soak_chunks.extend(
        chunks_for(url, body, duration, load_done)))
    loader.start()

    def settle(kind, target, rec):
        # the window closes once the node is healthy again (and back to speed)
        if not wait_live(target) and procs["supervisor"].poll() is None:
            rec["error"] = "not back within 3 minutes"
        rec["back_s"] = time.monotonic() - started - rec["at_s"]
        log(f"  node {target} healthy again {rec['back_s']:.1f} s after the failure began")

    try:
        failures = failure_loop(started, duration,
                                lambda: procs["supervisor"].poll() is None and loader.is_alive(),
                                lambda: None, lambda mark, t0: {}, settle)
    except BaseException:
        load_done.set()  # the load runs its whole time only when the failures did
        raise
    finally:
        loader.join()
        stop_sampling()
    server_alive = procs["supervisor"].poll() is None
    kill(procs["supervisor"], signal.SIGTERM)
    for n in NODES:
        kill(procs[n], signal.SIGTERM)

    windows = [(started + f["at_s"], started + f["end_s"] + 2.0) for f in failures
               if "end_s" in f]
    outside, inside = [], []
    for c in soak_chunks:
        for t, lat in zip(c["starts"], c["latencies"]):
            (inside if any(a <= t <= b for a, b in windows) else outside).append(lat)
    soak_p99 = p99(outside)
    answered = sum(c["ok"] for c in soak_chunks)
    lost = lost_in(soak_chunks)
    unrecovered = [f for f in failures if "error" in f]
    growth, fds, from_t = memory_growth(samples, duration)
    by_kind = {k: sum(1 for f in failures if f["kind"] == k) for k in WEIGHTS}
    chunk_rows = lambda cs: [{k: v for k, v in c.items() if k not in ("starts", "latencies")}
                             for c in cs]
    result = {
        "benchmark": "soak_serve",
        "quick": QUICK,
        "devices": "4 node processes on one host, EMULATED (0.45 of a core each, compute-time "
                   "dilation), loopback; `serve` (HTTP front and supervisor) in its own "
                   "process; hey on the same host",
        "minutes": MINUTES, "baseline_minutes": BASELINE_MINUTES, "mean_failure_s": MEAN_S,
        "seed": SEED, "connections": CONNECTIONS, "chunk_s": CHUNK_S,
        "failures": failures, "failures_by_kind": by_kind,
        "failures_unrecovered": len(unrecovered),
        "baseline_chunks": chunk_rows(base), "soak_chunks": chunk_rows(soak_chunks),
        "baseline_p99_s": base_p99, "soak_p99_outside_windows_s": soak_p99,
        "soak_p99_inside_windows_s": p99(inside),
        "requests_outside_windows": len(outside), "requests_inside_windows": len(inside),
        "baseline_lost": lost_in(base), "server_alive_at_end": server_alive,
        "rss_growth": growth, "fds_first_last": fds, "rss_from_s": from_t,
        "samples": samples,
        "wall_s": time.monotonic() - began,
    }
    headlines = {
        "soak_serve_failures": len(failures),
        "soak_serve_requests": answered,
        "soak_serve_requests_lost": lost,
        "soak_serve_p99_ratio": (soak_p99 / base_p99) if soak_p99 and base_p99 else None,
    }
    ms = lambda x: "n/a" if x is None else f"{x * 1e3:.1f} ms"
    write_results(result, headlines,
                  f"{len(failures)} failures in {MINUTES:g} min ({by_kind}, {len(unrecovered)} "
                  f"not recovered from); {answered} requests answered 200, {lost} lost; p99 "
                  f"outside the failure windows {ms(soak_p99)} ({len(outside)} requests), inside "
                  f"{ms(p99(inside))} ({len(inside)}), fault-free {ms(base_p99)}",
                  growth, fds, from_t)


if __name__ == "__main__":
    # SIGTERM ends the run as Ctrl-C does: through the `finally` that stops
    # every node and supervisor it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        soak_serve() if SERVE else soak_rounds() if ROUNDS else soak_train()
    finally:
        for p in list(procs.values()):
            kill(p, signal.SIGKILL)
