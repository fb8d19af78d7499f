#!/usr/bin/env python3
"""One raw HTTP request for test/e2e/http_hostile.sh.

http_raw.py PORT BODY_FILE < request-bytes

Sends the bytes to 127.0.0.1:PORT as they are, reads the answer, prints its
status code ("closed" if the server closed the connection without one,
"hang" if nothing came within 20 s) and writes the first answer's body to
BODY_FILE.
"""
import socket
import sys

port, body_file = int(sys.argv[1]), sys.argv[2]
request = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", port), timeout=20)
data = b""
try:
    try:
        s.sendall(request)
    except OSError:
        pass  # refused midway: the answer, if any, is still read
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is not None and len(rest) >= length:
                break
except socket.timeout:
    if not data:
        print("hang")
        sys.exit(0)
except OSError:
    pass
s.close()
head, _, rest = data.partition(b"\r\n\r\n")
with open(body_file, "wb") as f:
    f.write(rest)
parts = head.split(b" ")
if len(parts) >= 2 and parts[0].startswith(b"HTTP/"):
    print(parts[1].decode())
else:
    print("closed")
