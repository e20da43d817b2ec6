#!/usr/bin/env python3
"""A webhook receiver for sugard-forward's alert tests (stdlib only).

Every POST (any path but /control) is recorded: path, the status answered, the headers a webhook
sends (Content-Type, X-Sugard-Signature, X-Sugard-Alert, Title, Priority, Tags, Authorization,
X-Gotify-Key) and the body as text. It answers 200, unless told otherwise through POST /control
(JSON): `fail500` (answer the next N requests with 500), `down` (true: answer every request with
503 until set to false). GET /log lists the requests in the order they came.

Usage: webhook.py [--tls CERT KEY]; prints the port on stdout.
"""
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"log": [], "fail500": 0, "down": False}
HEADERS = ["Content-Type", "X-Sugard-Signature", "X-Sugard-Alert", "Title", "Priority", "Tags", "Authorization", "X-Gotify-Key"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/log":
            with lock:
                return self.reply(200, state["log"])
        self.reply(404, {"message": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length)
        if self.path == "/control":
            with lock:
                state.update(json.loads(data or b"{}"))
            return self.reply(200, {"ok": True})
        with lock:
            if state["down"]:
                status = 503
            elif state["fail500"] > 0:
                state["fail500"] -= 1
                status = 500
            else:
                status = 200
            state["log"].append({
                "path": self.path, "status": status,
                "headers": {h: self.headers.get(h) for h in HEADERS if self.headers.get(h) is not None},
                "body": data.decode("utf-8", "replace"),
            })
        self.reply(status, {"status": status})


def follow_parent(parent):
    # The test process may die without stopping us (a crash): then exit too.
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) == 4 and sys.argv[1] == "--tls":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
threading.Thread(target=follow_parent, args=(os.getppid(),), daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
