"""wait_for_head against a stub lensemble-verifyd (a local http.server) that
plays a scripted event stream per connection: the head it returns is a
trusted one of a later round of the run asked for, a dropped stream is
resumed with Last-Event-ID, a "lost" event makes it read the head again,
and it gives up at its timeout."""

import http.server
import json
import os
import threading
import time
import unittest

import helpers  # noqa: F401 - puts the client on sys.path

from lensemble_verify_client import _events, wait_for_head
from lensemble_verify_client._events import sse_events

os.environ["no_proxy"] = "127.0.0.1,localhost"
H4 = "4" * 64
H5 = "5" * 64
H6 = "6" * 64
HX = "a" * 64


def frame(eid, event, data):
    return ("id: %d\nevent: %s\ndata: %s\n\n" % (eid, event, json.dumps(data))).encode()


def head(eid, run, rnd, h):
    return frame(eid, "head", {"run": run, "round_index": rnd, "content_hash": h})


class Stub(http.server.ThreadingHTTPServer):
    """/events plays streams[n] on its n-th connection: a list of byte
    strings, each written after a short pause; then the stream is held
    open (hold) or closed. /chain?run=... answers chain; /artifact/<h>
    says trusted when h is in self.trusted."""

    daemon_threads = True

    def __init__(self):
        self.streams = []
        self.hold = True
        self.chain = {"committed_head": None}
        self.trusted = set()
        self.event_headers = []
        self.chain_asked = 0
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        s = self.server
        if self.path == "/events":
            n = len(s.event_headers)
            s.event_headers.append(self.headers.get("Last-Event-ID"))
            script = s.streams[n] if n < len(s.streams) else []
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            for chunk in script:
                time.sleep(0.05)
                self.wfile.write(chunk)
                self.wfile.flush()
            if s.hold and n == len(s.streams) - 1:
                s.stop.wait(10)
        elif self.path.startswith("/chain?"):
            s.chain_asked += 1
            self._json(200, dict(s.chain, run="."))
        elif self.path.startswith("/artifact/"):
            h = self.path[len("/artifact/"):]
            self._json(200, {"content_hash": h, "trusted": h in s.trusted})
        else:
            self._json(404, {"error": {"code": "not_found", "detail": "no such endpoint"}})

    def log_message(self, *args):
        pass


class WaitForHead(unittest.TestCase):
    def setUp(self):
        self.stub = Stub()
        self.thread = threading.Thread(target=self.stub.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.stub.server_address[1]
        self.retry = _events.RETRY_MIN
        _events.RETRY_MIN = 0.05

    def tearDown(self):
        _events.RETRY_MIN = self.retry
        self.stub.stop.set()
        self.stub.shutdown()
        self.stub.server_close()

    def test_current_head_already_later(self):
        self.stub.chain = {"committed_head": {"round_index": 5, "content_hash": H5}}
        self.stub.trusted = {H5}
        self.stub.streams = [[]]
        self.assertEqual(wait_for_head(self.url, after_round=4, timeout=5),
                         {"run": ".", "round_index": 5, "content_hash": H5})

    def test_waits_for_the_next_head(self):
        self.stub.chain = {"committed_head": {"round_index": 4, "content_hash": H4}}
        self.stub.trusted = {H4, H5, H6}
        self.stub.streams = [[b": keepalive\n\n",
                              frame(1, "verdict", {"content_hash": H5, "path": "round-00005",
                                                   "state": "verified", "code": None}),
                              head(2, "other", 9, HX),     # another run
                              head(3, ".", 4, H4),         # not later
                              head(4, ".", 5, H5)]]
        self.assertEqual(wait_for_head(self.url, timeout=5),
                         {"run": ".", "round_index": 5, "content_hash": H5})

    def test_a_head_not_trusted_now_is_passed_over(self):
        self.stub.trusted = {H6}
        self.stub.streams = [[head(1, ".", 5, H5), head(2, ".", 6, H6)]]
        self.assertEqual(wait_for_head(self.url, after_round=4, timeout=5)["content_hash"], H6)

    def test_a_dropped_stream_resumes_from_the_last_event(self):
        self.stub.trusted = {H5}
        self.stub.streams = [[frame(7, "verdict", {"path": "x"})], [head(8, ".", 5, H5)]]
        self.assertEqual(wait_for_head(self.url, after_round=4, timeout=5)["round_index"], 5)
        self.assertEqual(self.stub.event_headers, [None, "7"])

    def test_lost_events_read_the_head_again(self):
        self.stub.streams = [[b'event: lost\ndata: {"last_event_id":1,"first_available_id":9}\n\n'], []]
        self.stub.hold = False
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            wait_for_head(self.url, after_round=4, timeout=1)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertGreaterEqual(self.stub.chain_asked, 2)

    def test_timeout(self):
        self.stub.streams = [[b": keepalive\n\n"]]
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            wait_for_head(self.url, after_round=4, timeout=0.5)
        self.assertLess(time.monotonic() - t0, 3)

    def test_timeout_while_keepalives_come(self):
        self.stub.streams = [[b": keepalive\n\n"] * 40]
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            wait_for_head(self.url, after_round=4, timeout=0.5)
        self.assertLess(time.monotonic() - t0, 1.5)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            wait_for_head("ftp://127.0.0.1", timeout=1)
        with self.assertRaises(ValueError):
            wait_for_head(self.url, timeout=0)
        with self.assertRaises(TypeError):
            wait_for_head(self.url, after_round="4", timeout=1)


class Parse(unittest.TestCase):
    def test_sse_fields(self):
        lines = [b": comment\n", b"id: 3\n", b"event: head\n", b"data: {\"a\":\n", b"data: 1}\n",
                 b"\n", b"data:x\r\n", b"\r\n", b"id: 4\n", b"\n"]
        self.assertEqual(list(sse_events(lines)),
                         [(None, None, None), ("3", "head", '{"a":\n1}'), (None, "message", "x")])


if __name__ == "__main__":
    unittest.main()
