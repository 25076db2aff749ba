"""`salamander serve` driven the way Triton's clients drive a server
(kserve_client.py: binary by default, JSON when asked, one kept-alive
connection), its answers compared with PyTorch's on the same exported weights.

Usage: triton_compat.py URL MODEL_NAME EXPORTED.pt [GRPC_HOST:PORT]
With a gRPC address the same requests go over KServe v2's gRPC service too
(stubs generated from apps/kserve.proto, on PYTHONPATH) and must get the
same answers, byte for byte, and the same errors.
Prints "triton_compat: ok" and exits 0, or names the first difference.
"""

import json
import sys

import numpy as np
import torch

import salamander_torch
from kserve_client import Client, InferInput, InferRequestedOutput, ServerError

url, name, weights = sys.argv[1:4]
torch.set_num_threads(1)
model = salamander_torch.load(weights)
model.eval()
client = Client(url)
rng = np.random.default_rng(7)
x = rng.random((16, 1, 28, 28), dtype=np.float32)
sent = {"ok": 0, "failed": 0, "rows": 0}


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def expect(cond, what):
    if not cond:
        fail(what)


def reference(inputs):
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(inputs, dtype=np.float32))).numpy()


def infer(data, datatype="FP32", binary_in=True, binary_out=True, outputs=True, **kw):
    i = InferInput("input", data.shape, datatype)
    i.set_data_from_numpy(data, binary_data=binary_in)
    outs = [InferRequestedOutput("output", binary_data=binary_out)] if outputs else None
    r = client.infer(name, [i], outputs=outs, **kw)
    sent["ok"] += 1
    sent["rows"] += data.shape[0]
    return r


def refused(status, pattern, method, path, body=b"", headers=None):
    got, rheaders, data = client.request(method, path, body, headers or {})
    # (a request for a model the server does not serve counts to none)
    if method == "POST" and path.endswith("/infer") and path.startswith(f"/v2/models/{name}/"):
        sent["failed"] += 1
    expect(got == status, f"{method} {path}: {got}, expected {status}: {data[:300]}")
    expect(rheaders.get("content-type", "").startswith("application/json"),
           f"{method} {path}: an error body that is not JSON: {rheaders}")
    err = json.loads(data).get("error", "")
    expect(pattern in err, f"{method} {path}: no '{pattern}' in the error '{err}'")


def close(got, want, what, tol=1e-5):
    expect(got is not None and got.shape == want.shape,
           f"{what}: shape {None if got is None else got.shape}, PyTorch {want.shape}")
    diff = float(np.abs(got - want).max())
    expect(diff <= tol, f"{what}: differs from PyTorch by {diff}")


# ---- server and model metadata, with and without the version in the path
meta = client.get_json("/v2")
expect(sorted(meta["extensions"]) == ["binary_tensor_data", "model_configuration",
                                      "model_repository", "statistics"],
       f"/v2 lists {meta['extensions']}")
plain = client.get_json(f"/v2/models/{name}")
expect(plain == client.get_json(f"/v2/models/{name}/versions/1"), "metadata differs with /versions/1")
expect(plain["inputs"][0]["name"] == "input" and plain["outputs"][0]["name"] == "output", str(plain))
expect(client.get_json(f"/v2/models/{name}/versions/1/ready")["ready"], "not ready")
refused(404, "unknown version '2'", "GET", f"/v2/models/{name}/versions/2")
refused(404, "versions served: 1", "POST", f"/v2/models/{name}/versions/2/infer", b"{}")
sock = client.conn.sock

# ---- inference: binary (Triton's default), JSON, and each mixed, equal to PyTorch
want = reference(x)
r = infer(x, outputs=False, request_id="b-default")
expect(r.get_response().get("id") == "b-default", "the id is not echoed")
expect("parameters" in r.get_response()["outputs"][0], "no binary output by default")
close(r.as_numpy("output"), want, "binary in, binary out (no outputs named)")
close(infer(x, model_version="1").as_numpy("output"), want, "binary, /versions/1")
r = infer(x, binary_in=False, binary_out=False)
expect("data" in r.get_response()["outputs"][0], "JSON output asked, none given")
close(r.as_numpy("output"), want, "JSON in, JSON out")
close(infer(x, binary_in=True, binary_out=False).as_numpy("output"), want, "binary in, JSON out")
close(infer(x, binary_in=False, binary_out=True).as_numpy("output"), want, "JSON in, binary out")
close(infer(x[:1]).as_numpy("output"), want[:1], "one row")
# FP16 and BF16 inputs: the model sees them converted to FP32
half = x.astype(np.float16)
close(infer(half, datatype="FP16").as_numpy("output"),
      reference(half.astype(np.float32)), "FP16 input")
bf = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
close(infer(x, datatype="BF16").as_numpy("output"), reference(bf), "BF16 input")
# content types: JSON declared, and binary declared with its header length
i = InferInput("input", x.shape, "FP32")
i.set_data_from_numpy(x)
close(client.infer(name, [i], extra_headers={"Content-Type": "application/octet-stream"})
      .as_numpy("output"), want, "application/octet-stream")
sent["ok"] += 1
sent["rows"] += 16
i.set_data_from_numpy(x, binary_data=False)
close(client.infer(name, [i], extra_headers={"Content-Type": "application/json"})
      .as_numpy("output"), want, "application/json")
sent["ok"] += 1
sent["rows"] += 16

# ---- strict requests: 400 with a JSON error naming the offending value
path = f"/v2/models/{name}/infer"
one = {"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": [0.5] * 784}


def body(**fields):
    return json.dumps(fields).encode()


refused(400, "unknown input 'img'", "POST", path, body(inputs=[dict(one, name="img")]))
refused(400, "the model takes one input 'input'", "POST", path, body(inputs=[dict(one, name="img")]))
refused(400, "input 'input' is given twice", "POST", path, body(inputs=[one, one]))
refused(400, "the request has no inputs", "POST", path, body(inputs=[]))
refused(400, "unknown output 'probs'", "POST", path, body(inputs=[one], outputs=[{"name": "probs"}]))
refused(400, "input datatype 'INT64'", "POST", path, body(inputs=[dict(one, datatype="INT64")]))
refused(400, "Inference-Header-Content-Length", "POST", path, body(inputs=[one]),
        {"Content-Type": "application/octet-stream"})
header = json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32",
                                 "parameters": {"binary_data_size": 3136}}]}).encode()
raw = x[:1].tobytes()
refused(400, "declares 3136 bytes of binary data, the body has 3135", "POST", path,
        header + raw[:-1], {"Inference-Header-Content-Length": str(len(header))})
refused(400, "that no input's binary_data_size claims", "POST", path, header + raw + b"\0",
        {"Inference-Header-Content-Length": str(len(header))})
refused(400, "the body has only", "POST", path, header,
        {"Inference-Header-Content-Length": str(len(header) + 1)})
refused(400, "must be a number of bytes", "POST", path, header + raw,
        {"Inference-Header-Content-Length": "12x"})
refused(404, "unknown model 'resnet'", "POST", "/v2/models/resnet/infer", header + raw,
        {"Inference-Header-Content-Length": str(len(header))})
expect(client.conn.sock is sock, "the server closed the kept-alive connection")

# ---- statistics and configuration in Triton's schemas, counting what was sent
for p in ("/v2/models/stats", f"/v2/models/{name}/stats", f"/v2/models/{name}/versions/1/stats"):
    stats = client.get_json(p)["model_stats"]
    expect(len(stats) == 1 and stats[0]["name"] == name and stats[0]["version"] == "1", str(stats))
    s = stats[0]
    inf = s["inference_stats"]
    expect(inf["success"]["count"] == sent["ok"], f"{p}: success {inf['success']}, sent {sent}")
    expect(inf["fail"]["count"] == sent["failed"], f"{p}: fail {inf['fail']}, sent {sent}")
    expect(s["inference_count"] == sent["rows"], f"{p}: inference_count {s['inference_count']}")
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        expect(inf[k]["count"] == sent["ok"] and inf[k]["ns"] > 0, f"{p}: {k} {inf[k]}")
    expect(inf["success"]["ns"] >= inf["compute_infer"]["ns"], f"{p}: {inf}")
    batches = s["batch_stats"]
    expect(sum(b["compute_infer"]["count"] for b in batches) == s["execution_count"] > 0,
           f"{p}: batch_stats {batches}, execution_count {s['execution_count']}")
    expect(sum(b["batch_size"] * b["compute_infer"]["count"] for b in batches) == sent["rows"],
           f"{p}: batch_stats rows {batches}")
    expect(s["last_inference"] > 1.6e12, f"{p}: last_inference {s['last_inference']}")
config = client.get_json(f"/v2/models/{name}/config")
expect(config["input"][0] == {"name": "input", "data_type": "TYPE_FP32", "dims": [1, 28, 28]},
       str(config["input"]))
expect(config["output"][0]["dims"] == [10] and config["max_batch_size"] > 0, str(config))
expect(config["salamander"]["plan"] and len(config["salamander"]["stages"]) >= 1, str(config))
refused(404, "unknown model 'resnet'", "GET", "/v2/models/resnet/config")

# ---- Triton's Prometheus series, the same counts
_, _, text = client.request("GET", "/metrics")
metrics = {}
for line in text.decode().splitlines():
    if line.startswith("nv_inference"):
        key, value = line.rsplit(" ", 1)
        metrics[key] = float(value)
labels = f'{{model="{name}",version="1"}}'
for series, value in (("nv_inference_request_success", sent["ok"]),
                      ("nv_inference_request_failure", sent["failed"]),
                      ("nv_inference_count", sent["rows"]),
                      ("nv_inference_pending_request_count", 0)):
    expect(metrics.get(series + labels) == value,
           f"{series}{labels} = {metrics.get(series + labels)}, expected {value}")
for series in ("nv_inference_exec_count", "nv_inference_request_duration_us",
               "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us"):
    expect(metrics.get(series + labels, 0) > 0, f"{series}{labels} missing or 0")


# ---- the same over gRPC: same answers to the byte, same errors, same statistics
def grpc_section(address):
    import grpc
    import kserve_pb2 as pb
    import kserve_pb2_grpc
    stub = kserve_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(address))
    expect(stub.ServerLive(pb.ServerLiveRequest()).live, "gRPC: not live")
    expect(stub.ServerReady(pb.ServerReadyRequest()).ready, "gRPC: not ready")
    expect(list(stub.ServerMetadata(pb.ServerMetadataRequest()).extensions) == meta["extensions"],
           "gRPC: other extensions than HTTP's")
    gmeta = stub.ModelMetadata(pb.ModelMetadataRequest(name=name, version="1"))
    expect(gmeta.name == plain["name"] and list(gmeta.versions) == plain["versions"] and
           list(gmeta.inputs[0].shape) == plain["inputs"][0]["shape"] and
           list(gmeta.outputs[0].shape) == plain["outputs"][0]["shape"],
           f"gRPC metadata {gmeta} differs from HTTP's {plain}")
    expect(stub.ModelReady(pb.ModelReadyRequest(name=name)).ready, "gRPC: model not ready")

    def request(data, datatype="FP32", raw=True, version="", **kw):
        t = pb.ModelInferRequest.InferInputTensor(name=kw.get("input", "input"),
                                                  datatype=datatype, shape=list(data.shape))
        r = pb.ModelInferRequest(model_name=kw.get("model", name), model_version=version,
                                 id=kw.get("id", ""))
        if raw:
            r.raw_input_contents.append(data.tobytes())
        else:
            t.contents.fp32_contents.extend(data.flatten().tolist())
        r.inputs.append(t)
        for o in kw.get("outputs", []):
            r.outputs.append(pb.ModelInferRequest.InferRequestedOutputTensor(name=o))
        return r

    def answer(req):
        res = stub.ModelInfer(req)
        sent["ok"] += 1
        sent["rows"] += req.inputs[0].shape[0]
        out = res.outputs[0]
        expect(out.name == "output" and out.datatype == "FP32", f"gRPC output {out}")
        return res, np.frombuffer(res.raw_output_contents[0], dtype="<f4").reshape(list(out.shape))

    def refused_grpc(code, pattern, req):
        try:
            stub.ModelInfer(req)
        except grpc.RpcError as e:
            sent["failed"] += 1
            expect(e.code() == code, f"gRPC: {e.code()}, expected {code}: {e.details()}")
            expect(pattern in e.details(), f"gRPC: no '{pattern}' in '{e.details()}'")
            return e.details()
        fail(f"gRPC accepted what it should refuse ('{pattern}')")

    http_answer = infer(x).as_numpy("output")
    res, y = answer(request(x, id="g1", outputs=["output"]))
    expect(res.id == "g1" and res.model_name == name and res.model_version == "1", str(res))
    expect(np.array_equal(y, http_answer), "gRPC and HTTP answers differ for the same input")
    close(y, want, "gRPC raw contents")
    close(answer(request(x, raw=False, version="1"))[1], want, "gRPC fp32_contents, version 1")
    close(answer(request(half, datatype="FP16"))[1], reference(half.astype(np.float32)),
          "gRPC FP16")
    # the same refusals, with the same words as over HTTP
    _, _, http_err = client.request("POST", path, body(inputs=[dict(one, name="img")]))
    sent["failed"] += 1
    grpc_err = refused_grpc(grpc.StatusCode.INVALID_ARGUMENT, "unknown input 'img'",
                            request(x[:1], input="img"))
    expect(json.loads(http_err)["error"] == grpc_err,
           f"gRPC says '{grpc_err}', HTTP '{json.loads(http_err)['error']}'")
    refused_grpc(grpc.StatusCode.INVALID_ARGUMENT, "unknown output 'probs'",
                 request(x[:1], outputs=["probs"]))
    bad = request(x[:1])
    bad.raw_input_contents[0] = bad.raw_input_contents[0][:-1]
    refused_grpc(grpc.StatusCode.INVALID_ARGUMENT, "the shape [1,1,28,28] of FP32 needs 3136", bad)
    two = request(x[:1])
    two.raw_input_contents.append(b"1234")
    refused_grpc(grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents has 2 entries for 1 inputs",
                 two)
    refused_grpc(grpc.StatusCode.NOT_FOUND, "versions served: 1", request(x[:1], version="2"))
    refused_grpc(grpc.StatusCode.NOT_FOUND, "unknown model 'resnet'", request(x[:1], model="resnet"))
    sent["failed"] -= 1  # (counted to no model: the server does not serve it)
    # the statistics count both fronts' requests
    gstats = stub.ModelStatistics(pb.ModelStatisticsRequest(name=name)).model_stats[0]
    hstats = client.get_json(f"/v2/models/{name}/stats")["model_stats"][0]
    expect(gstats.inference_stats.success.count == sent["ok"] ==
           hstats["inference_stats"]["success"]["count"],
           f"gRPC success {gstats.inference_stats.success.count}, HTTP "
           f"{hstats['inference_stats']['success']['count']}, sent {sent}")
    expect(gstats.inference_stats.fail.count == sent["failed"], f"gRPC fail, sent {sent}")
    expect(gstats.inference_count == sent["rows"], f"gRPC inference_count {gstats.inference_count}")
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest()).models
    expect(len(index) == 1 and index[0].name == name and index[0].state == "READY", str(index))
    try:
        stub.ModelStatistics(pb.ModelStatisticsRequest(name="resnet"))
        fail("gRPC statistics of an unknown model")
    except grpc.RpcError as e:
        expect(e.code() == grpc.StatusCode.NOT_FOUND, str(e.code()))
    # both fronts bound a request by --max-body-mb (the test serves with 1 MB):
    # 400 rows (1.25 MB) are refused over either, before they are read
    big = rng.random((400, 1, 28, 28), dtype=np.float32)
    try:
        stub.ModelInfer(request(big))
        fail("gRPC took a message over --max-body-mb")
    except grpc.RpcError as e:
        expect(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, f"gRPC over the bound: {e.code()}")
    # over HTTP the refusal comes from the headers alone, before the body
    # (a client still sending would find the connection closed): headers only
    import socket
    host, port = client.host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Length: {big.nbytes + 2}\r\n"
                    "Inference-Header-Content-Length: 2\r\n\r\n".encode())
        answer = b""
        while b"}" not in answer.partition(b"\r\n\r\n")[2]:
            chunk = raw.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    expect(head.startswith(b"HTTP/1.1 413"), f"HTTP over the bound: {head[:80]}")
    expect("larger than the limit" in json.loads(rest).get("error", ""), f"413 body: {rest[:200]}")


if len(sys.argv) > 4:
    grpc_section(sys.argv[4])
client.close()
print(f"triton_compat: ok ({sent['ok']} answered, {sent['failed']} refused)")
