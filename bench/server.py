"""The benchmarks' target: an OpenAI chat-completions server on loopback, in its own process.

    python bench/server.py [--delay 0.2] [--fault-rate 0.05] [--log-arrivals PATH]

Prints its port on the first line of stdout, then answers every request after
`--delay` seconds with the three scores the prompt asks for (options read from
its "A. name" lines). `--fault-rate` mixes in 429 (Retry-After: 1), 500, an
unreadable answer and a 3 s answer, a quarter each. `--log-arrivals` appends
each request's arrival time (unix seconds) to PATH, for server-side rate checks.
Standard library only: the process under test is the monitor, not this one.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_OPTION = re.compile(r"^([ABC])\. (.+)$", re.MULTILINE)


def _body(text: str, status_model: str = "bench-model") -> bytes:
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
        "model": status_model, "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": len(text) // 4,
                  "total_tokens": 120 + len(text) // 4}}).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--log-arrivals", metavar="PATH", default=None)
    args = ap.parse_args()
    log = open(args.log_arrivals, "a", buffering=1) if args.log_arrivals else None  # noqa: SIM115
    lock = threading.Lock()
    rng = random.Random(5)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            arrived = time.time()
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            with lock:
                roll = rng.random()
                if log is not None:
                    log.write(f"{arrived:.6f}\n")
            user = next((m["content"] for m in body.get("messages", [])
                         if m["role"] == "user"), "")
            labels = [m.group(1) for m in _OPTION.finditer(user)]
            block = {lab: {"score": 5 + i, "strengths": ["x"], "weaknesses": ["y"]}
                     for i, lab in enumerate(labels)}
            status, text, delay, headers = 200, json.dumps(block), args.delay, {}
            f = args.fault_rate
            if roll < f / 4:
                status, headers = 429, {"Retry-After": "1"}
            elif roll < f / 2:
                status = 500
            elif roll < 3 * f / 4:
                text = "no scores, sorry"
            elif roll < f:
                delay = 3.0
            time.sleep(delay)
            payload = _body(text) if status == 200 else json.dumps(
                {"error": {"message": f"status {status}", "type": "bench"}}).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a killed run)

    # The stdlib's listen backlog of 5 drops connections when a benchmark opens 32+ at once.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
