#!/usr/bin/env python3
"""Two small S3 servers for test/e2e/anonymous.sh.

s3_anon.py proxy PORT UPSTREAM_PORT LOG
    A logging proxy: forwards every request to 127.0.0.1:UPSTREAM_PORT
    unchanged (Host header included) and writes one JSON line a request to
    LOG: {"method", "target", "headers"}, so that the test can show what a
    client sent, signatures included.

s3_anon.py aws PORT LOG
    A store in another region, answering every request as Amazon S3 answers
    a request sent to the wrong region (the S3 API reference, "Error
    responses": PermanentRedirect is 301 Moved Permanently, "The bucket you
    are attempting to access must be addressed using the specified
    endpoint"; AuthorizationHeaderMalformed is 400 Bad Request, "The
    authorization header is malformed", with the expected <Region>).  A
    bucket whose name starts with "moved" gets the first, with
    x-amz-bucket-region and <Bucket>/<Endpoint> in the body as S3 sends
    them; any other bucket the second.  The bucket is in eu-west-1.  Each
    request is logged as by the proxy.

Listens on 127.0.0.1 only.  Prints "ready" once it accepts connections.
"""
import http.client
import http.server
import json
import sys
import threading

REGION = "eu-west-1"
lock = threading.Lock()


def log(path, handler):
    line = json.dumps({"method": handler.command, "target": handler.path,
                       "headers": dict(handler.headers.items())})
    with lock, open(path, "a") as f:
        f.write(line + "\n")


def body_of(handler):
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else None


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def forward(self):
        log(LOG, self)
        body = body_of(self)
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("connection", "keep-alive")}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "keep-alive",
                                 "transfer-encoding", "content-length"):
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length",
                             resp.getheader("Content-Length") or "0")
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

    def log_message(self, *args):
        pass


PERMANENT_REDIRECT = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>PermanentRedirect</Code><Message>The bucket you are "
    "attempting to access must be addressed using the specified endpoint. "
    "Please send all future requests to this endpoint.</Message>"
    "<Bucket>{bucket}</Bucket><Endpoint>{bucket}.s3.{region}.amazonaws.com"
    "</Endpoint><RequestId>D4FC960AEE757AF2</RequestId><HostId>"
    "aGVsbG8gd29ybGQ=</HostId></Error>")
HEADER_MALFORMED = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>AuthorizationHeaderMalformed</Code><Message>The "
    "authorization header is malformed; the region 'us-east-1' is wrong; "
    "expecting '{region}'</Message><Region>{region}</Region><RequestId>"
    "7T88HFP23DFETSEW</RequestId><HostId>aGVsbG8gd29ybGQ=</HostId></Error>")


class Aws(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        log(LOG, self)
        body_of(self)
        bucket = self.path.lstrip("/").split("/")[0].split("?")[0]
        if bucket.startswith("moved"):
            status, doc = 301, PERMANENT_REDIRECT
        else:
            status, doc = 400, HEADER_MALFORMED
        data = doc.format(bucket=bucket, region=REGION).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Server", "AmazonS3")
        if status == 301:
            self.send_header("x-amz-bucket-region", REGION)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "proxy":
        UPSTREAM, LOG, handler = int(sys.argv[3]), sys.argv[4], Proxy
    else:
        LOG, handler = sys.argv[3], Aws
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    print("ready", flush=True)
    server.serve_forever()
