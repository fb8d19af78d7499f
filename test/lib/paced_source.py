#!/usr/bin/env python3
"""paced_source.py: an HTTP source whose every connection is capped at a
byte rate, for bench/adaptive.sh and the e2e tests of ranges.

Why not nginx's limit_rate: it limits a request, not a connection, and
lets each request send its first second's worth at once
(limit = rate * (now - start + 1) - sent), so a range shorter than a
second's worth is not capped at all, and ranges over a keep-alive
connection each get that burst again.  Here each connection has a token
bucket of RATE bytes a second holding at most one chunk (64 KiB): one
connection never goes faster than RATE, however its bytes are split into
requests.

Serves the files of DIR (any path: its last name) with GET and HEAD, a strong
ETag and Last-Modified, one byte range (Range: bytes=a-b, a-), If-Match,
If-Range; HTTP/1.1 with keep-alive.  With LOG, a line a request as
nginx's `$msec $request_time $status "$request" "$http_range"` (its end,
its seconds, its status, its request line, its Range).

Usage: paced_source.py DIR PORT RATE_BYTES_PER_SECOND [LOG]
"""
import email.utils
import hashlib
import http.server
import os
import re
import sys
import threading
import time

CHUNK = 64 * 1024


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # the headers and the first chunk are not held back for an ACK
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def log_request(self, code="-", size="-"):
        """Kept until the body is sent (answer), as nginx logs."""
        self.status = int(code) if code != "-" else code

    def logged(self, began):
        if LOG is None:
            return
        end = time.time()
        with LOG_LOCK, open(LOG, "a") as f:
            f.write('%.3f %.3f %s "%s" "%s"\n' % (
                end, end - began, getattr(self, "status", "-"),
                self.requestline, self.headers.get("Range", "-")))

    def pace(self, n):
        """Wait until the connection's bucket holds n bytes, take them."""
        now = time.monotonic()
        if not hasattr(self, "tokens"):
            self.tokens, self.last = float(CHUNK), now
        self.tokens = min(float(CHUNK), self.tokens + (now - self.last) * RATE)
        self.last = now
        if self.tokens < n:
            time.sleep((n - self.tokens) / RATE)
            self.last = time.monotonic()
            self.tokens = float(n)
        self.tokens -= n

    def answer(self, body):
        name = os.path.basename(self.path)
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        st = os.stat(path)
        etag = '"%s"' % hashlib.md5(
            ("%s:%d:%d" % (name, st.st_size, st.st_mtime_ns)).encode()
        ).hexdigest()
        first, last, status = 0, st.st_size - 1, 200
        want = self.headers.get("If-Match")
        if want and want != etag and want != "*":
            self.send_response(412)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if_range = self.headers.get("If-Range")
        if m and (if_range is None or if_range == etag):
            first = int(m.group(1))
            if m.group(2):
                last = min(int(m.group(2)), st.st_size - 1)
            if first > last:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % st.st_size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, st.st_size))
        self.end_headers()
        if not body:
            return
        with open(path, "rb") as f:
            pos = first
            while pos <= last:
                n = min(CHUNK, last - pos + 1)
                self.pace(n)
                self.wfile.write(os.pread(f.fileno(), n, pos))
                pos += n

    def do_GET(self):
        began = time.time()
        self.answer(True)
        self.logged(began)

    def do_HEAD(self):
        began = time.time()
        self.answer(False)
        self.logged(began)


if __name__ == "__main__":
    ROOT, port, RATE = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    LOG = sys.argv[4] if len(sys.argv) > 4 else None
    LOG_LOCK = threading.Lock()
    http.server.ThreadingHTTPServer.daemon_threads = True
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
