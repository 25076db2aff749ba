"""A `salamander serve --repository` with several models, driven over HTTP and
gRPC (tests/integration/model_repository_test.sh starts it).

Usage: model_repository.py URL GRPC_HOST:PORT SECRET_FILE REPOSITORY SPARE_CKPT
The repository holds cnn/1, cnn/2, digits/7 and broken/ (no version);
SPARE_CKPT becomes cnn/3 before a reload. Prints "model_repository: ok" or
names the first difference.
"""

import http.client
import json
import os
import shutil
import time
import sys
import threading
import urllib.parse

import grpc
import kserve_pb2 as pb
import kserve_pb2_grpc

url, grpc_address, secret_file, repo, spare = sys.argv[1:6]
secret = open(secret_file).read().strip()
address = urllib.parse.urlsplit(url)


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def expect(cond, what):
    if not cond:
        fail(what)


class Http:
    """One kept-alive connection, as Triton's clients keep one."""

    def __init__(self):
        self.conn = http.client.HTTPConnection(address.hostname, address.port, timeout=60)

    def request(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        h = dict(headers or {})
        if data is not None:
            h["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=h)
        r = self.conn.getresponse()
        text = r.read()
        return r.status, (json.loads(text) if text else None)


api = Http()
auth = {"Authorization": f"Bearer {secret}"}
row = [0.25 + 0.5 * ((i * 7919) % 13) / 13 for i in range(784)]


def infer(client, model, version=None):
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    status, body = client.request("POST", path, {"inputs": [
        {"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": row}]})
    return status, body


def index(ready=None):
    status, body = api.request("POST", "/v2/repository/index",
                                {} if ready is None else {"ready": ready})
    expect(status == 200, f"index: {status} {body}")
    return {m["name"]: m for m in body}


# ---- every model of the repository, the highest version of each
idx = index()
expect(set(idx) == {"cnn", "digits", "broken"}, f"index: {idx}")
expect(idx["cnn"]["state"] == "READY" and idx["cnn"]["version"] == "2", f"cnn: {idx['cnn']}")
expect(idx["digits"]["state"] == "READY" and idx["digits"]["version"] == "7", str(idx))
expect(idx["broken"]["state"] == "UNAVAILABLE" and "model.ckpt" in idx["broken"]["reason"],
       f"broken: {idx['broken']}")
expect(set(index(ready=True)) == {"cnn", "digits"}, "index with ready: true")
status, meta = api.request("GET", "/v2")
expect("model_repository" in meta["extensions"], f"/v2: {meta}")

# each model answers its own: the same row, other weights, other outputs
s1, cnn_v2 = infer(api, "cnn")
s2, digits = infer(api, "digits", "7")
expect(s1 == 200 and s2 == 200, f"infer: {s1} {cnn_v2}, {s2} {digits}")
expect(cnn_v2["model_name"] == "cnn" and cnn_v2["model_version"] == "2", str(cnn_v2))
expect(digits["model_name"] == "digits" and digits["model_version"] == "7", str(digits))
expect(cnn_v2["outputs"][0]["data"] != digits["outputs"][0]["data"],
       "cnn and digits gave the same outputs")
status, body = infer(api, "cnn", "1")
expect(status == 404 and "versions served: 2" in body["error"], f"cnn/1: {status} {body}")
status, body = infer(api, "broken")
expect(status == 404 and "not loaded" in body["error"], f"broken: {status} {body}")

# ---- load and unload behind the secret (HTTP)
for headers, why in (({}, "no Authorization"), ({"Authorization": "Bearer wrong"}, "a wrong one"),
                     ({"Authorization": secret}, "no Bearer")):
    status, body = api.request("POST", "/v2/repository/models/digits/unload", {}, headers)
    expect(status == 403 and "cluster secret" in body["error"], f"unload with {why}: {status} {body}")
expect(infer(api, "digits")[0] == 200, "digits stopped serving after refused unloads")
status, body = api.request("POST", "/v2/repository/models/nothing/load", {}, auth)
expect(status == 404 and "'cnn'" in body["error"], f"load of an unknown model: {status} {body}")

# ---- while requests stream to cnn: unload digits, load it again, reload
# cnn at a new version; every request is answered
answers = {"ok": 0, "other": [], "versions": set()}
streaming = threading.Event()
done = threading.Event()


def stream():
    client = Http()
    while not done.is_set():
        status, body = infer(client, "cnn")
        if status == 200:
            answers["ok"] += 1
            answers["versions"].add(body["model_version"])
        else:
            answers["other"].append((status, body))
        streaming.set()


worker = threading.Thread(target=stream)
worker.start()
streaming.wait(60)
steps = []
status, body = api.request("POST", "/v2/repository/models/digits/unload", {}, auth)
expect(status == 200, f"unload digits: {status} {body}")
steps.append(answers["ok"])
status, body = infer(api, "digits")
expect(status == 404 and "not loaded: unloaded" in body["error"], f"after unload: {status} {body}")
expect(index()["digits"]["state"] == "UNAVAILABLE", "digits still listed ready")
status, body = api.request("POST", "/v2/repository/models/digits/load", None, auth)
expect(status == 200, f"load digits: {status} {body}")
steps.append(answers["ok"])
expect(infer(api, "digits")[1]["outputs"][0]["data"] == digits["outputs"][0]["data"],
       "digits answers otherwise after it was loaded again")
os.makedirs(f"{repo}/cnn/3")
shutil.copy(spare, f"{repo}/cnn/3/model.ckpt")
status, body = api.request("POST", "/v2/repository/models/cnn/load", {}, auth)
expect(status == 200, f"reload cnn: {status} {body}")
steps.append(answers["ok"])
deadline = time.monotonic() + 60
while "3" not in answers["versions"] and time.monotonic() < deadline and worker.is_alive():
    time.sleep(0.05)
done.set()
worker.join(120)
expect(not answers["other"], f"requests lost or refused while loading: {answers['other'][:3]}")
expect(answers["ok"] > steps[0] >= 1, f"no requests while loading: {answers['ok']}, {steps}")
expect(answers["versions"] == {"2", "3"}, f"the stream saw versions {answers['versions']}")
status, cnn_v3 = infer(api, "cnn")
expect(cnn_v3["model_version"] == "3" and cnn_v3["outputs"][0]["data"] != cnn_v2["outputs"][0]["data"],
       f"cnn after the reload: {cnn_v3}")
status, body = infer(api, "cnn", "2")
expect(status == 404 and "versions served: 3" in body["error"], f"cnn/2 after reload: {body}")

# ---- statistics and metrics: every model, each family once
status, stats = api.request("GET", "/v2/models/stats")
expect({s["name"] for s in stats["model_stats"]} == {"cnn", "digits"}, str(stats)[:300])
conn = api.conn
conn.request("GET", "/metrics")
text = conn.getresponse().read().decode()
helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")]
expect(len(helps) == len(set(helps)), f"a metric family twice: {sorted(helps)}")
for model in ("cnn", "digits"):
    expect(f'nv_inference_request_success{{model="{model}",version=' in text,
           f"no Triton series for {model}")

# ---- the same over gRPC
stub = kserve_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_address))
models = {m.name: m for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
expect(set(models) == {"cnn", "digits", "broken"} and models["cnn"].version == "3",
       f"gRPC index: {models}")
try:
    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="digits"))
    fail("gRPC unload without the secret was taken")
except grpc.RpcError as e:
    expect(e.code() == grpc.StatusCode.PERMISSION_DENIED, f"gRPC unload: {e.code()} {e.details()}")
md = (("authorization", f"Bearer {secret}"),)
stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="digits"), metadata=md)
try:
    stub.ModelMetadata(pb.ModelMetadataRequest(name="digits"))
    fail("gRPC: digits still there after its unload")
except grpc.RpcError as e:
    expect(e.code() == grpc.StatusCode.NOT_FOUND, f"gRPC metadata: {e.code()}")
expect(infer(api, "digits")[0] == 404, "HTTP still serves digits after a gRPC unload")
stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="digits"), metadata=md)
meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="digits"))
expect(meta.versions == ["7"], f"gRPC metadata after load: {meta}")
stats = stub.ModelStatistics(pb.ModelStatisticsRequest())
expect({s.name for s in stats.model_stats} == {"cnn", "digits"}, str(stats)[:300])
expect(stub.ServerReady(pb.ServerReadyRequest()).ready, "gRPC: the server is not ready")
print(f"model_repository: ok ({answers['ok']} requests to cnn through two loads and an "
      f"unload, none lost)")
