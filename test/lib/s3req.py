# s3req.py ENDPOINT ACCESS_KEY SECRET METHOD PATH [BODY_FILE] [Header:Value ...]
#
# One S3 request signed with SigV4 (region us-east-1) by the botocore that
# Debian's awscli carries, with headers the AWS CLI cannot send (e.g.
# If-None-Match on a CopyObject).  Prints the HTTP status and the first
# 200 bytes of the answer on one line.  BODY_FILE "-" or absent: no body.
# With S3REQ_CUT=N in the environment, an upload cut short instead: the
# request's headers and the first N bytes of its body, then the end of what
# is sent; it waits for the store to close the connection (at most 10 s)
# and prints "cut N".
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

import awscli  # noqa: F401  (makes awscli's botocore importable as botocore)
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ep, key, secret, method, path = sys.argv[1:6]
rest = sys.argv[6:]
body = b''
if rest and ':' not in rest[0]:
    if rest[0] != '-':
        body = open(rest[0], 'rb').read()
    rest = rest[1:]
headers = dict(h.split(':', 1) for h in rest)
req = AWSRequest(method=method, url=ep + path, headers=headers, data=body)
S3SigV4Auth(Credentials(key, secret), 's3', 'us-east-1').add_auth(req)
if 'S3REQ_CUT' in os.environ:
    cut = int(os.environ['S3REQ_CUT'])
    u = urllib.parse.urlsplit(ep + path)
    head = '%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n' % (method, path, u.netloc, len(body))
    head += ''.join('%s: %s\r\n' % kv for kv in req.headers.items())
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(head.encode() + b'\r\n' + body[:cut])
    s.shutdown(socket.SHUT_WR)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()
    print('cut', cut)
    sys.exit(0)
r = urllib.request.Request(ep + path, method=method, data=body if method in ('PUT', 'POST') else None,
                           headers=dict(req.headers.items()))
try:
    with urllib.request.urlopen(r) as resp:
        status, text = resp.status, resp.read()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read()
print(status, text[:200].decode('utf-8', 'replace').replace('\n', ' '))
