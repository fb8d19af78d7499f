#!/usr/bin/env python3
"""The answers to requests sent on one connection, for test/e2e/http_hostile.sh.

http_answers.py PORT < request-bytes

Sends the bytes to 127.0.0.1:PORT as they are (one request or several, one
after the other), reads until the server closes the connection or nothing
more comes within 5 s, and prints the status code of every answer, in
order, then "closed" or "open".
"""
import re
import socket
import sys

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
try:
    s.sendall(sys.stdin.buffer.read())
except OSError:
    pass  # refused midway: the answers, if any, are still read
data, state = b"", "closed"
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    state = "open"
except OSError:
    pass  # reset: closed
codes = [m.decode() for m in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", data)]
print(" ".join(codes + [state]))
