#!/usr/bin/env python3
"""Slow HTTP clients for test/e2e/http_hostile.sh.

http_slow.py PORT COUNT SECONDS STATUS_FILE [body]

Opens COUNT connections from 127.0.0.1 to 127.0.0.1:PORT and trickles a
request into each, one byte a second: the header block (or, with "body",
whole headers and then a declared body).  Writes to STATUS_FILE, after
each round, "held N" (connections open for more than a second).  Ends when
every connection has been closed by the server or SECONDS have passed, and
prints "accepted A closed C longest L" (seconds the longest-lived
connection stayed open, SECONDS if one outlived the run).
"""
import select
import socket
import sys
import time

port, count, seconds, status = (int(sys.argv[1]), int(sys.argv[2]),
                                float(sys.argv[3]), sys.argv[4])
body = len(sys.argv) > 5 and sys.argv[5] == "body"
if body:
    head = (b"POST /api/session HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    trickle = b"x" * 1000
else:
    head = b"GET / HTTP/1.1\r\nHost: x\r\n"
    trickle = b"X-Slow: " + b"a" * 1000

start = time.monotonic()
conns = []  # [socket, opened, closed_at or None, sent]
for _ in range(count):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(head)
    except OSError:
        s.close()
        continue
    s.setblocking(False)
    conns.append([s, time.monotonic(), None, 0])

while time.monotonic() - start < seconds:
    live = [c for c in conns if c[2] is None]
    if not live:
        break
    now = time.monotonic()
    # a closed connection is readable (EOF or reset)
    readable, _, _ = select.select([c[0] for c in live], [], [], 1.0)
    now = time.monotonic()
    for c in live:
        gone = False
        if c[0] in readable:
            try:
                gone = c[0].recv(65536) == b"" or True
            except OSError:
                gone = True
        if not gone:
            try:
                c[0].send(trickle[c[3] % len(trickle):][:1])
                c[3] += 1
            except OSError:
                gone = True
        if gone:
            c[2] = now
            c[0].close()
    held = sum(1 for c in conns if c[2] is None and now - c[1] > 1)
    with open(status, "w") as f:
        f.write("held %d\n" % held)

end = time.monotonic()
longest = max([(c[2] if c[2] is not None else end) - c[1] for c in conns]
              or [0])
closed = sum(1 for c in conns if c[2] is not None)
for c in conns:
    if c[2] is None:
        c[0].close()
print("accepted %d closed %d longest %d" % (len(conns), closed, longest))
