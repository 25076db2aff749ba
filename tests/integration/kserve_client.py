"""A KServe v2 / Triton HTTP client that builds its requests the way
tritonclient.http does (Triton's Python client, not packaged by Debian):
inputs in the binary tensor data extension by default, outputs asked in
binary unless told otherwise, the JSON header's length in
Inference-Header-Content-Length, one kept-alive HTTP/1.1 connection.
tests/integration/triton_compat.py drives `salamander serve` with it.
"""

import http.client
import json

import numpy as np

_DTYPES = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16",
           np.dtype(np.float64): "FP64", np.dtype(np.int64): "INT64"}


class ServerError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class InferInput:
    """tritonclient.http.InferInput: name, shape, datatype and the data."""

    def __init__(self, name, shape, datatype):
        self.name, self.shape, self.datatype = name, list(shape), datatype
        self.raw = None
        self.parameters = {}
        self.data = None

    def set_data_from_numpy(self, array, binary_data=True):
        self.shape = list(array.shape)
        if binary_data:
            if self.datatype == "BF16":  # tritonclient: float32 in, top halves out
                bits = array.astype(np.float32).view(np.uint32) >> 16
                self.raw = bits.astype("<u2").tobytes()
            else:
                self.raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
            self.parameters = {"binary_data_size": len(self.raw)}
            self.data = None
        else:
            self.raw = None
            self.parameters = {}
            self.data = array.flatten().tolist()

    def tensor(self):
        t = {"name": self.name, "shape": self.shape, "datatype": self.datatype}
        if self.parameters:
            t["parameters"] = self.parameters
        if self.data is not None:
            t["data"] = self.data
        return t


class InferRequestedOutput:
    def __init__(self, name, binary_data=True):
        self.name, self.binary_data = name, binary_data

    def tensor(self):
        return {"name": self.name, "parameters": {"binary_data": self.binary_data}}


class InferResult:
    """The answer: the JSON header, and the outputs as numpy arrays."""

    def __init__(self, body, json_length):
        if json_length is None:
            self.header, self.binary = json.loads(body), b""
        else:
            self.header = json.loads(body[:json_length])
            self.binary = body[json_length:]

    def get_response(self):
        return self.header

    def as_numpy(self, name):
        offset = 0
        for out in self.header["outputs"]:
            size = out.get("parameters", {}).get("binary_data_size")
            if out["name"] == name:
                if size is None:
                    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])
                raw = self.binary[offset:offset + size]
                return np.frombuffer(raw, dtype="<f4").reshape(out["shape"])
            offset += size or 0
        return None


class Client:
    """tritonclient.http.InferenceServerClient, over one kept-alive connection."""

    def __init__(self, url):
        self.host_port = url.replace("http://", "").rstrip("/")
        self.conn = http.client.HTTPConnection(self.host_port, timeout=60)

    def close(self):
        self.conn.close()

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body) of one request on the kept-alive connection."""
        self.conn.request(method, path, body=body, headers=headers or {})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def get_json(self, path):
        status, _, body = self.request("GET", path)
        if status != 200:
            raise ServerError(status, body.decode())
        return json.loads(body)

    def infer(self, model_name, inputs, outputs=None, model_version="", request_id="",
              extra_headers=None):
        request = {}
        if request_id:
            request["id"] = request_id
        request["inputs"] = [i.tensor() for i in inputs]
        if outputs:
            request["outputs"] = [o.tensor() for o in outputs]
        else:  # as tritonclient: no outputs named, all of them in binary
            request["parameters"] = {"binary_data_output": True}
        body = json.dumps(request).encode()
        headers = dict(extra_headers or {})
        raw = [i.raw for i in inputs if i.raw is not None]
        if raw:
            headers["Inference-Header-Content-Length"] = str(len(body))
            body += b"".join(raw)
        path = f"/v2/models/{model_name}"
        if model_version:
            path += f"/versions/{model_version}"
        status, rheaders, data = self.request("POST", path + "/infer", body, headers)
        if status != 200:
            raise ServerError(status, data.decode(errors="replace"))
        length = rheaders.get("inference-header-content-length")
        return InferResult(data, int(length) if length is not None else None)
