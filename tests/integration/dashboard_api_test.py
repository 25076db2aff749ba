#!/usr/bin/env python3
"""The dashboard's API as a client meets it, bad input first (ctest
cli.dashboard_api): unknown routes 404; actions without the secret, with a
wrong one, without the page's token or from another origin 403; a sixth
wrong secret a minute from one address 429; oversized and malformed action
bodies 400; a checkpoint outside the run's directory 400 and one inside
written; pause and resume answered and on the timeline; the event stream;
200 idle connections that stop neither the page nor the job; a cluster
without a secret read-only; beyond loopback no start without a secret, and
with one every route behind it (Bearer or the login cookie).

Usage: dashboard_api_test.py PATH/TO/salamander
"""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="salamander-dashboard-api-")
SECRET = "api-test-" + os.urandom(6).hex()
PROCS = []


def fail(why):
    print("FAIL:", why)
    for p in PROCS:
        try:
            with open(p.err_path) as f:
                print(f"--- {p.name} stderr (last lines)\n" + "".join(f.readlines()[-20:]))
        except OSError:
            pass
    stop_all()
    sys.exit(1)


def stop_all():
    for p in PROCS:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


# (an unexpected exception too: no process outlives the test)
atexit.register(stop_all)


def start(name, args, secret=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("SALAMANDER_TLS", None)
    if secret:
        env["SALAMANDER_SECRET"] = SECRET
    else:
        env.pop("SALAMANDER_SECRET", None)
    out_path = os.path.join(WORK, name + ".out")
    err_path = os.path.join(WORK, name + ".err")
    p = subprocess.Popen([BIN] + args, cwd=WORK, env=env, stdout=open(out_path, "w"),
                         stderr=open(err_path, "w"), start_new_session=True)
    p.name, p.out_path, p.err_path = name, out_path, err_path
    PROCS.append(p)
    return p


def until(what, check, limit_s=120):
    """Polls check() until it gives a truthy value; the limit only guards
    against a hang (ctest's timeout bounds the test)."""
    end = time.monotonic() + limit_s
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > end:
            fail("gave up waiting for " + what)
        time.sleep(0.1)


def ended(p, limit_s=120):
    """Waits for p to exit; a process that outlives the limit is a hang:
    its threads' stacks (when gdb is here) and its stderr go to the log."""
    try:
        return p.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        gdb = shutil.which("gdb")
        if gdb:
            bt = subprocess.run([gdb, "-batch", "-p", str(p.pid), "-ex", "thread apply all bt"],
                                capture_output=True, text=True, timeout=120)
            print(f"--- {p.name} threads\n" + bt.stdout[-20000:])
        fail(f"{p.name} did not exit within {limit_s} s")


def printed(p, pattern):
    def look():
        if p.poll() is not None:
            fail(f"{p.name} exited {p.returncode}")
        with open(p.out_path) as f:
            return re.search(pattern, f.read())
    return until(f"{p.name} to print {pattern}", look)


def request(port, method, path, body=None, headers=None, source="127.0.0.1", host="127.0.0.1"):
    c = http.client.HTTPConnection(host, port, timeout=30, source_address=(source, 0))
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, data, r
    finally:
        c.close()


def jbody(data):
    try:
        return json.loads(data)
    except ValueError:
        fail(f"not JSON: {data[:200]!r}")


def expect(status, got, what):
    if got[0] != status:
        fail(f"{what}: HTTP {got[0]}, expected {status}: {got[1][:300]!r}")
    return got


def state(port, **kw):
    s, data, _ = request(port, "GET", "/api/state", **kw)
    return jbody(data) if s == 200 else None


# ---- a training job on two embedded nodes, with a secret
job = start("train", ["train", "--stages", "2", "--model", "cnn", "--epochs", "200",
                      "--dashboard", "127.0.0.1:0", "--metrics", "run/metrics.jsonl"])
port = int(printed(job, r"dashboard: http://127\.0\.0\.1:(\d+)/").group(1))
until("the job to train", lambda: (state(port) or {}).get("job") and
      state(port)["job"]["phase"] == "training")
session = jbody(expect(200, request(port, "GET", "/api/session"), "session")[1])
if not session["actions"] or len(session["csrf"]) < 32:
    fail(f"session: {session}")
good = {"Authorization": "Bearer " + SECRET, "X-Salamander-Token": session["csrf"],
        "Content-Type": "application/json"}


def act(name, args=None, headers=None, body=None, source="127.0.0.1"):
    if body is None:
        body = json.dumps({"args": args or []})
    return request(port, "POST", "/api/actions/" + name, body=body,
                   headers=good if headers is None else headers, source=source)


# unknown routes, and errors as JSON
for path in ["/nope", "/api/nope", "/api/actions"]:
    got = expect(404, request(port, "GET", path), "GET " + path)
    if "error" not in jbody(got[1]):
        fail("a 404 without an error: " + path)
expect(404, act("format-disk"), "an unknown action")
# the page and its headers
got = expect(200, request(port, "GET", "/"), "the page")
csp = got[2].getheader("Content-Security-Policy") or ""
if "script-src 'self'" not in csp or "frame-ancestors 'none'" not in csp:
    fail("no Content-Security-Policy on the page: " + csp)
if b"<script>" in got[1]:
    fail("the page has an inline script")
expect(200, request(port, "GET", "/chart.js"), "chart.js")

# DNS rebinding: on loopback only a loopback Host is answered
got = expect(403, request(port, "GET", "/api/state", headers={"Host": f"evil.example:{port}"}),
             "a rebound name")
expect(200, request(port, "GET", "/api/state", headers={"Host": f"localhost:{port}"}), "localhost")

# who may act
expect(403, act("pause", headers={"X-Salamander-Token": session["csrf"]}), "no secret")
expect(403, act("pause", headers=dict(good, Authorization="Bearer wrong")), "a wrong secret")
expect(403, act("pause", headers={k: v for k, v in good.items() if k != "X-Salamander-Token"}),
       "no page token")
expect(403, act("pause", headers=dict(good, Origin="http://evil.example")), "another origin")
# a sixth wrong secret in a minute from one address: 429 (from 127.0.0.2,
# so the checks below from 127.0.0.1 are not held up)
for i in range(5):
    expect(403, act("pause", headers=dict(good, Authorization="Bearer wrong"), source="127.0.0.2"),
           f"wrong secret {i + 1}")
expect(429, act("pause", source="127.0.0.2"), "the sixth attempt after five wrong secrets")
with open(job.err_path) as f:
    if "a wrong cluster secret from 127.0.0.2" not in f.read():
        fail("the wrong secrets were not logged")

# bad bodies
expect(400, act("pause", body="x" * 5000), "an oversized body")
expect(400, act("pause", body="{not json"), "malformed JSON")
expect(400, act("kill", body=json.dumps({"args": "stage 1"})), "args not a list")
expect(400, act("kill", ["stage"]), "kill stage without N")
expect(400, act("kill", ["stage", "1; pause"]), "a second command smuggled in")
expect(400, act("checkpoint", ["../../outside.ckpt"]), "a checkpoint outside the run")
expect(400, act("checkpoint", ["/tmp/outside.ckpt"]), "an absolute checkpoint outside the run")

# actions that work, and the timeline
got = jbody(expect(200, act("pause"), "pause")[1])
if "paus" not in got["answer"]:
    fail(f"pause answered {got}")
expect(200, act("resume"), "resume")
got = jbody(expect(200, act("checkpoint", ["saved.ckpt"]), "checkpoint under the run")[1])
until("the checkpoint file", lambda: os.path.exists(os.path.join(WORK, "run", "saved.ckpt")))
expect(400, request(port, "GET", "/api/events?since=x"), "since=x")


def timeline_has(*kinds):
    events = jbody(request(port, "GET", "/api/events?since=0")[1])["events"]
    seen = {e["event"] for e in events}
    seqs = [e["seq"] for e in events]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        fail(f"events out of order: {seqs[:20]}")
    return all(k in seen for k in kinds)


until("pause, resume and checkpoint on the timeline",
      lambda: timeline_has("pause", "resume", "checkpoint"))
later = jbody(request(port, "GET", "/api/events?since=1000000")[1])
if later["events"]:
    fail("events past the end")

# the stream: a state within a few polls
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
buf = b""
end = time.monotonic() + 60
while b"event: state\ndata: {" not in buf and time.monotonic() < end:
    buf += s.recv(65536)
s.close()
if b"text/event-stream" not in buf or b"event: state\ndata: {" not in buf:
    fail(f"no state on the stream: {buf[:300]!r}")

# 200 idle connections stop neither the page nor the job
before = state(port)["job"]["training"]["committed"]
idle = []
for _ in range(200):
    try:
        idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        break


def answered_and_moved():
    try:
        st = state(port)
    except OSError:
        return False
    return st and st["job"]["training"]["committed"] > before


until("the state API to answer beside 200 idle connections", answered_and_moved)
for c in idle:
    c.close()
print(f"200 idle connections: the page answered and the job went on (committed {before} -> "
      f"{state(port)['job']['training']['committed']})")
expect(200, act("stop"), "stop")
ended(job)

# ---- a cluster without a secret: read-only
ro = start("readonly", ["train", "--stages", "1", "--model", "cnn", "--epochs", "200",
                        "--dashboard", "127.0.0.1:0", "--metrics", "none"], secret=False)
rport = int(printed(ro, r"dashboard: http://127\.0\.0\.1:(\d+)/").group(1))
rs = jbody(request(rport, "GET", "/api/session")[1])
if rs["actions"]:
    fail("a cluster without a secret offers actions")
got = request(rport, "POST", "/api/actions/pause", body="{}", headers={
    "Authorization": "Bearer anything", "X-Salamander-Token": rs["csrf"]})
if got[0] != 403 or "read-only" not in jbody(got[1])["error"]:
    fail(f"an action without a cluster secret: {got[0]} {got[1]!r}")
until("--metrics none: the timeline still fills", lambda: jbody(
    request(rport, "GET", "/api/events?since=0")[1])["events"])
os.killpg(ro.pid, signal.SIGTERM)
ended(ro)

# ---- --dashboard-https: the --tls directory's certificate, verified
import ssl  # noqa: E402
certs_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                        "make-certs.sh")
made = subprocess.run([certs_sh, "-o", os.path.join(WORK, "certs"), "--host", "127.0.0.1",
                       "central"], capture_output=True, text=True)
if made.returncode != 0:
    fail("make-certs: " + made.stderr[-500:])
TLS_DIR = os.path.join(WORK, "certs", "central")
CTX = ssl.create_default_context(cafile=os.path.join(WORK, "certs", "ca.pem"))
nohttps = start("nohttps", ["train", "--stages", "1", "--model", "cnn", "--dashboard",
                            "127.0.0.1:0", "--dashboard-https", "--metrics", "none"])
ended(nohttps)
if nohttps.returncode == 0 or "--tls DIR" not in open(nohttps.err_path).read():
    fail("--dashboard-https without --tls was not refused with a hint")


def srequest(port, method, path, headers=None):
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=CTX)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read(), r
    finally:
        c.close()


tls = start("https", ["train", "--stages", "1", "--model", "cnn", "--epochs", "200",
                      "--tls", TLS_DIR, "--dashboard", "127.0.0.1:0", "--dashboard-https",
                      "--metrics", "none"])
tport = int(printed(tls, r"dashboard: https://127\.0\.0\.1:(\d+)/").group(1))
got = srequest(tport, "GET", "/api/session")
if got[0] != 200 or "csrf" not in json.loads(got[1]):
    fail(f"the dashboard over HTTPS answered {got[0]}")
os.killpg(tls.pid, signal.SIGTERM)
ended(tls)

# ---- beyond loopback: a secret and HTTPS, or no start; then every route needs the secret
nos = start("open", ["train", "--stages", "1", "--model", "cnn", "--dashboard", "0.0.0.0:0",
                     "--tls", TLS_DIR, "--dashboard-https", "--metrics", "none"], secret=False)
ended(nos)
err = open(nos.err_path).read()
if nos.returncode == 0 or "needs the cluster secret" not in err:
    fail(f"--dashboard 0.0.0.0 without a secret: exit {nos.returncode}, {err[-300:]!r}")
clear = start("clear", ["train", "--stages", "1", "--model", "cnn", "--dashboard", "0.0.0.0:0",
                        "--metrics", "none"])
ended(clear)
err = open(clear.err_path).read()
if clear.returncode == 0 or "--dashboard-https" not in err:
    fail(f"--dashboard 0.0.0.0 without HTTPS: exit {clear.returncode}, {err[-300:]!r}")
wide = start("wide", ["train", "--stages", "1", "--model", "cnn", "--epochs", "200",
                      "--tls", TLS_DIR, "--dashboard", "0.0.0.0:0", "--dashboard-https",
                      "--metrics", "none"])
wport = int(printed(wide, r"dashboard: https://127\.0\.0\.1:(\d+)/").group(1))
expect(401, srequest(wport, "GET", "/api/state"), "a read beyond loopback without the secret")
expect(401, srequest(wport, "GET", "/api/stream"), "the stream without the secret")
expect(200, srequest(wport, "GET", "/api/state", headers={"Authorization": "Bearer " + SECRET}),
       "a read with the secret")
expect(403, srequest(wport, "POST", "/api/login", headers={"Authorization": "Bearer nope"}),
       "a login with a wrong secret")
got = expect(200, srequest(wport, "POST", "/api/login",
                           headers={"Authorization": "Bearer " + SECRET}), "a login")
set_cookie = got[2].getheader("Set-Cookie") or ""
cookie = set_cookie.split(";")[0]
if not cookie.startswith("salamander_session=") or "HttpOnly" not in set_cookie or \
        "Secure" not in set_cookie:
    fail("login set no HttpOnly, Secure session cookie: " + set_cookie)
expect(200, srequest(wport, "GET", "/api/state", headers={"Cookie": cookie}),
       "a read with the cookie")
os.killpg(wide.pid, signal.SIGTERM)
ended(wide)

# ---- a server of two models: its page names every model it holds, as
# they are unloaded and loaded; stopped from the dashboard it ends as
# SIGTERM would
ckpt = os.path.join(WORK, "run", "saved.ckpt")
srv = start("serve", ["serve", "--stages", "1", "--listen", "127.0.0.1:0", "--dashboard",
                      "127.0.0.1:0", "--metrics", "none", "--load", ckpt,
                      "--load", "second=" + ckpt])
sport = int(printed(srv, r"dashboard: http://127\.0\.0\.1:(\d+)/").group(1))
hport = int(printed(srv, r"listening: http://127\.0\.0\.1:(\d+)").group(1))
until("the serving job to serve", lambda: (state(sport) or {}).get("job") and
      state(sport)["job"]["phase"] == "serving")
if state(sport).get("models") != ["cnn", "second"]:
    fail(f"the serving page names models {state(sport).get('models')}")
bearer = {"Authorization": "Bearer " + SECRET}
expect(200, request(hport, "POST", "/v2/repository/models/second/unload", body="",
                    headers=bearer), "unload a model")
until("the page to drop the unloaded model", lambda: state(sport).get("models") == ["cnn"])
expect(200, request(hport, "POST", "/v2/repository/models/second/load", body="",
                    headers=bearer), "load it again")
until("the page to name it again",
      lambda: state(sport).get("models") == ["cnn", "second"])
stoken = jbody(request(sport, "GET", "/api/session")[1])["csrf"]
got = request(sport, "POST", "/api/actions/stop", body="{}", headers={
    "Authorization": "Bearer " + SECRET, "X-Salamander-Token": stoken})
if got[0] != 200:
    fail(f"stop on a serving job: {got[0]} {got[1]!r}")
ended(srv)
with open(srv.err_path) as f:
    serr = f.read()
if srv.returncode != 0 or "the serving job was stopped (the dashboard)" not in serr:
    fail(f"serve after stop: exit {srv.returncode}, {serr[-400:]!r}")

# ---- a finished run's report: one self-contained page
report = os.path.join(WORK, "report.html")
made = subprocess.run([BIN, "plot", os.path.join(WORK, "run", "metrics.jsonl"), "-o", report],
                      capture_output=True, text=True)
if made.returncode != 0:
    fail("plot -o report.html: " + made.stderr[-500:])
page = open(report).read()
if 'id="report-data"' not in page or "<script src=" in page or '"event":"pause"' not in page:
    fail("the report is not self-contained or misses the run's events")
stop_all()
shutil.rmtree(WORK, ignore_errors=True)  # (kept when a check fails: its logs)
print("dashboard API: ok")
