"""The baseline of `bench/run.sh serve`: a plain PyTorch eager model behind a
minimal HTTP server answering the same KServe v2 JSON as `salamander serve`
(POST /v2/models/NAME/infer, GET /v2/health/ready), done as a careful
engineer would without a serving system: HTTP/1.1 keep-alive, a thread per
connection, TCP_NODELAY, one request at a time through the model (no
batching), the same torch thread count.

Usage: pytorch_server.py WEIGHTS.pt [--name cnn] [--port 0] [--threads 1]
Prints "listening: http://127.0.0.1:PORT" once it accepts connections.
"""

import argparse
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

import salamander_torch

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("weights", help="the state dict `salamander export` wrote")
parser.add_argument("--name", default="cnn", help="the model's name in URLs")
parser.add_argument("--port", type=int, default=0, help="0: any free port")
parser.add_argument("--threads", type=int, default=1, help="torch threads")
args = parser.parse_args()
torch.set_num_threads(args.threads)
model = salamander_torch.load(args.weights)
model.eval()
lock = threading.Lock()  # one forward at a time, as one device would


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *_):
        pass

    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v2/health/ready":
            self.answer(200, {"ready": True})
        else:
            self.answer(404, {"error": "no such path"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path != f"/v2/models/{args.name}/infer":
            self.answer(404, {"error": "no such path"})
            return
        try:
            request = json.loads(raw)
            inp = request["inputs"][0]
            x = torch.tensor(inp["data"], dtype=torch.float32).reshape(inp["shape"])
        except (ValueError, KeyError, IndexError, TypeError, RuntimeError) as e:
            self.answer(400, {"error": str(e)})
            return
        with lock, torch.no_grad():
            y = model(x)
        self.answer(200, {"model_name": args.name, "model_version": "1",
                          "outputs": [{"name": "output", "datatype": "FP32",
                                       "shape": list(y.shape),
                                       "data": y.flatten().tolist()}]})


server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
server.daemon_threads = True
print(f"listening: http://127.0.0.1:{server.server_address[1]}", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
sys.exit(0)
