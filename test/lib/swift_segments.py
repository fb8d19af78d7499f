#!/usr/bin/env python3
"""Orphan segments in a Swift store behind its S3 API.

    swift_segments.py PORT ACCOUNT:USER SECRET BUCKET

Swift's s3api keeps a multipart upload's parts as objects of the container
BUCKET+segments, named KEY/UPLOAD_ID/N, with a marker object KEY/UPLOAD_ID
while the upload is open; a completed upload's object is an SLO manifest
that names its segments.  Deleting the object or aborting the upload
removes them; completing with some parts leaves the others behind, unseen
by any S3 request (doc/stores/swift.tsv, subset_orphans).  This prints
every segment that neither an open upload nor an existing object's
manifest names, one a line, and "segments N" last (N: all segments seen).
"""
import json
import sys
import urllib.parse
import urllib.request


def request(url, token=None, method="GET", headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    if token:
        req.add_header("X-Auth-Token", token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def listing(storage, token, container):
    names, marker = [], ""
    while True:
        q = urllib.parse.urlencode({"format": "json", "limit": 10000, "marker": marker})
        status, _, body = request("%s/%s?%s" % (storage, urllib.parse.quote(container), q), token)
        if status == 404:
            return names
        if status != 200:
            sys.exit("listing %s: HTTP %d" % (container, status))
        page = [o["name"] for o in json.loads(body)]
        if not page:
            return names
        names += page
        marker = page[-1]


def main():
    port, user, secret, bucket = sys.argv[1:5]
    status, headers, _ = request("http://127.0.0.1:%s/auth/v1.0" % port,
                                 headers={"X-Auth-User": user, "X-Auth-Key": secret})
    if status // 100 != 2:
        sys.exit("tempauth: HTTP %d" % status)
    storage, token = headers["X-Storage-Url"], headers["X-Auth-Token"]
    segcont = bucket + "+segments"
    segments = listing(storage, token, segcont)
    parts = [s for s in segments if s.rsplit("/", 1)[-1].isdigit() and s.count("/") >= 2]
    markers = set(segments) - set(parts)
    named = set()
    for key in set(p.rsplit("/", 2)[0] for p in parts):
        status, _, body = request("%s/%s/%s?multipart-manifest=get" % (
            storage, urllib.parse.quote(bucket), urllib.parse.quote(key)), token)
        if status != 200:
            continue
        try:
            manifest = json.loads(body)
        except ValueError:
            continue   # a plain object: it names no segment
        prefix = "/%s/" % segcont
        for seg in manifest if isinstance(manifest, list) else []:
            name = urllib.parse.unquote(seg.get("name", ""))
            if name.startswith(prefix):
                named.add(name[len(prefix):])
    for p in sorted(parts):
        if p.rsplit("/", 1)[0] not in markers and p not in named:
            print(p)
    print("segments %d" % len(parts))


if __name__ == "__main__":
    main()
