#!/usr/bin/env python3
"""A Nightscout-compatible API for sugard's tests (stdlib only; a real Nightscout needs MongoDB).

What it does as Nightscout does: POST /api/v1/entries and /api/v1/treatments take a JSON array
(or one object), need the `api-secret` header (the SHA-1 hex digest of API_SECRET) or `?token=`,
answer 401 otherwise, and deduplicate entries on `date` + `type` (treatments on `identifier`, or
without one on `created_at` + `eventType`, replacing the stored one). GET /api/v1/entries.json and /api/v1/treatments.json list what is stored.

What tests steer through POST /control (JSON, no auth): `fail500` (answer the next N writes with
500), `refuse` (answer every write with 401 as if the secret were wrong), `reject` (answer every
write with 400 and this message; null clears it), `delay` (seconds to wait before answering).
GET /log lists every write: path, status, number of documents, whether a secret or token came,
and the documents' `date` and `device` values in the order they came.

Usage: nightscout.py --secret S [--token T] [--tls CERT KEY]; prints the port on stdout.
"""
import argparse
import hashlib
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

lock = threading.Lock()
state = {"entries": [], "treatments": [], "log": [], "fail500": 0, "refuse": False, "reject": None, "delay": 0}


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

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def do_GET(self):
        path = urlparse(self.path).path
        with lock:
            if path == "/api/v1/entries.json":
                return self.reply(200, sorted(state["entries"], key=lambda e: -e["date"]))
            if path == "/api/v1/treatments.json":
                return self.reply(200, state["treatments"])
            if path == "/log":
                return self.reply(200, state["log"])
        self.reply(404, {"status": 404, "message": "Not found"})

    def do_POST(self):
        url = urlparse(self.path)
        if url.path == "/control":
            with lock:
                state.update(self.body())
            return self.reply(200, {"ok": True})
        if url.path not in ("/api/v1/entries", "/api/v1/treatments"):
            return self.reply(404, {"status": 404, "message": "Not found"})
        documents = self.body()
        if isinstance(documents, dict):
            documents = [documents]
        secret = self.headers.get("api-secret")
        token = parse_qs(url.query).get("token", [None])[0]
        authorised = secret == hashlib.sha1(args.secret.encode()).hexdigest() or (args.token and token == args.token)
        with lock:
            delay = state["delay"]
        if delay:
            time.sleep(delay)
        with lock:
            status, answer = 200, None
            if state["refuse"] or not authorised:
                status, answer = 401, {"status": 401, "message": "Unauthorized", "description": "Invalid/Missing"}
            elif state["fail500"] > 0:
                state["fail500"] -= 1
                status, answer = 500, {"status": 500, "message": "MongoDB is not answering"}
            elif state["reject"]:
                status, answer = 400, {"status": 400, "message": state["reject"]}
            elif url.path == "/api/v1/entries":
                answer = []
                for entry in documents:
                    if not isinstance(entry.get("date"), int) or "type" not in entry:
                        status, answer = 400, {"status": 400, "message": "entry without date or type"}
                        break
                    if not any(e["date"] == entry["date"] and e["type"] == entry["type"] for e in state["entries"]):
                        state["entries"].append(entry)
                    answer.append(entry)
            else:
                answer = []
                for treatment in documents:
                    # As Nightscout 15: an identifier is the upsert key; without one, created_at + eventType.
                    if treatment.get("identifier") is not None:
                        same = [i for i, t in enumerate(state["treatments"]) if t.get("identifier") == treatment["identifier"]]
                    else:
                        key = (treatment.get("created_at"), treatment.get("eventType"))
                        same = [i for i, t in enumerate(state["treatments"])
                                if t.get("identifier") is None and (t.get("created_at"), t.get("eventType")) == key]
                    if same:
                        state["treatments"][same[0]] = treatment
                    else:
                        state["treatments"].append(treatment)
                    answer.append(treatment)
            state["log"].append({
                "path": url.path, "status": status, "count": len(documents),
                "secret": secret is not None, "token": token is not None,
                "dates": [d.get("date") for d in documents if isinstance(d, dict)],
                "devices": [d.get("device") for d in documents if isinstance(d, dict)],
            })
        self.reply(status, answer)


parser = argparse.ArgumentParser()
parser.add_argument("--secret", required=True)
parser.add_argument("--token")
parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
args = parser.parse_args()
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if args.tls:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.tls[0], args.tls[1])
    server.socket = context.wrap_socket(server.socket, server_side=True)


def follow_parent(parent):
    # The test process may die without stopping us (a crash): then exit too.
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


threading.Thread(target=follow_parent, args=(os.getppid(),), daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
