# store_probe.py ENDPOINT ACCESS_KEY SECRET BUCKET
#
# Observes, by requests it makes under BUCKET/probe/, each S3 behaviour
# Remora relies on (doc/operator-guide.md, "Object stores"), and prints one
# line per observation: KEY, a tab, what was seen (a table cell).  Requests
# are signed with SigV4 (us-east-1) by the botocore that Debian's awscli
# carries, sent as they are (headers the AWS CLI cannot send), and every
# answer is read whatever its status.  test/e2e/store.sh runs it.
import hashlib
import base64
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import awscli  # noqa: F401  (makes awscli's botocore importable as botocore)
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

EP, KEY, SECRET, BUCKET = sys.argv[1:5]
MIB = 1024 * 1024


def req(method, path, body=b'', headers=None):
    """One signed request; (status, headers, body text).  PATH is a key
    (and its query) or, from "?" on, the bucket's query."""
    url = EP + '/' + BUCKET + ('' if path.startswith('?') else '/') + path
    headers = dict(headers or {})
    ar = AWSRequest(method=method, url=url, headers=headers, data=body)
    S3SigV4Auth(Credentials(KEY, SECRET), 's3', 'us-east-1').add_auth(ar)
    r = urllib.request.Request(url, method=method,
                               data=body if method in ('PUT', 'POST') else None,
                               headers=dict(ar.headers.items()))
    try:
        with urllib.request.urlopen(r) as resp:
            return resp.status, resp.headers, resp.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode('utf-8', 'replace')


def tag(text, name):
    m = re.search('<%s>(.*?)</%s>' % (name, name), text, re.S)
    return m.group(1) if m is not None else None


def answer(st, text):
    """An answer as a cell: the status and the error code, if any."""
    code = tag(text, 'Code')
    return '%d %s' % (st, code) if code else str(st)


def out(key, value):
    print('%s\t%s' % (key, value), flush=True)


def put(key, data, headers=None):
    st, h, text = req('PUT', key, data, headers)
    assert st == 200, 'PUT %s: %s' % (key, answer(st, text))
    return h['ETag']


def create(key):
    st, _, text = req('POST', key + '?uploads')
    assert st == 200, 'CreateMultipartUpload: %s' % answer(st, text)
    return tag(text, 'UploadId')


def qid(upload):
    return urllib.parse.quote(upload, safe='')


def part(key, upload, n, data):
    return req('PUT', '%s?partNumber=%d&uploadId=%s' % (key, n, qid(upload)), data)


def complete(key, upload, parts):
    xml = '<CompleteMultipartUpload>%s</CompleteMultipartUpload>' % ''.join(
        '<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>' % p for p in parts)
    return req('POST', '%s?uploadId=%s' % (key, qid(upload)), xml.encode())


def head_etag(key):
    st, h, _ = req('HEAD', key)
    return h['ETag'] if st == 200 else None


def unq(etag):
    return (etag or '').strip('"')


def multipart(key, sizes):
    """A completed multipart object of parts of these sizes: (upload id,
    the parts' (number, ETag), their MD5s, the Complete answer)."""
    upload = create(key)
    parts, md5s = [], []
    for n, size in enumerate(sizes, 1):
        data = bytes([n]) * size
        st, h, text = part(key, upload, n, data)
        assert st == 200, 'UploadPart: %s' % answer(st, text)
        parts.append((n, h['ETag']))
        md5s.append(hashlib.md5(data).digest())
    st, _, text = complete(key, upload, parts)
    assert st == 200 and '<Error>' not in text, 'Complete: %s' % answer(st, text)
    return upload, parts, md5s, text


def etag_form(key, md5s, whole):
    etag = unq(head_etag(key))
    if etag == '%s-%d' % (hashlib.md5(b''.join(md5s)).hexdigest(), len(md5s)):
        return '`"<md5 of the part MD5s>-<n>"`'
    if etag == hashlib.md5(whole).hexdigest():
        return 'MD5 of the whole object'
    return 'other: `%s`' % etag


def quoting(etag):
    if etag is None or etag == '':
        return 'empty'
    if etag.startswith('&quot;'):
        return '`&quot;…&quot;`'
    return '`"…"`' if etag.startswith('"') else '**unquoted**'


def condition(right, wrong):
    """A condition's effect from the answers to the right and a wrong ETag."""
    r, w = right.split()[0], wrong.split()[0]
    if r == '200' and w == '412':
        return 'honoured'
    if r == '200' and w == '200':
        return '**ignored**'
    if r == '412' and w == '412':
        return '**412 even with the right ETag**'
    return 'right ETag: %s; wrong: %s' % (right, wrong)


def copy_conditions(what, src, etag):
    cs = {'x-amz-copy-source': '/%s/%s' % (BUCKET, src)}
    res = {}
    for name, e in (('right', etag), ('wrong', '"0123456789abcdef0123456789abcdef"')):
        st, _, text = req('PUT', 'probe/copy-%s-%s' % (what, name), b'',
                          dict(cs, **{'x-amz-copy-source-if-match': e}))
        res[name] = answer(st, text if st != 200 or '<Error>' in text else '')
    out('copy_if_match_%s' % what, condition(res['right'], res['wrong']))
    upload = create('probe/upc-%s' % what)
    for n, name, e in ((1, 'right', etag), (2, 'wrong', '"0123456789abcdef0123456789abcdef"')):
        st, _, text = req('PUT', 'probe/upc-%s?partNumber=%d&uploadId=%s' % (what, n, qid(upload)),
                          b'', dict(cs, **{'x-amz-copy-source-if-match': e,
                                           'x-amz-copy-source-range': 'bytes=0-1023'}))
        res[name] = answer(st, text if st != 200 or '<Error>' in text else '')
    out('upc_if_match_%s' % what, condition(res['right'], res['wrong']))
    req('DELETE', 'probe/upc-%s?uploadId=%s' % (what, qid(upload)))


def main():
    small = b'remora store probe\n' * 1000
    plain_etag = put('probe/plain.bin', small)

    # multipart: ETag form, the Complete answer's ETag, ListParts and
    # UploadPart once completed
    sizes = [5 * MIB, 1000]
    upload, parts, md5s, text = multipart('probe/mpu.bin', sizes)
    whole = b''.join(bytes([n]) * s for n, s in enumerate(sizes, 1))
    out('mpu_etag', etag_form('probe/mpu.bin', md5s, whole))
    out('complete_etag', quoting(tag(text, 'ETag')))
    st, _, text = req('GET', 'probe/mpu.bin?uploadId=%s' % qid(upload))
    out('list_parts_done', answer(st, text) + (' (lists the parts)' if st == 200 else ''))
    st, _, text = part('probe/mpu.bin', upload, 3, b'late part')
    out('upload_part_done', answer(st, text) + (' **accepted**' if st == 200 else ''))
    st, _, text = req('GET', 'probe/mpu.bin?uploadId=unknown-upload-id')
    out('list_parts_unknown', answer(st, text))
    mpu_etag = head_etag('probe/mpu.bin')

    # copy-source conditions, on a plain and on a multipart object
    copy_conditions('plain', 'probe/plain.bin', plain_etag)
    copy_conditions('mpu', 'probe/mpu.bin', mpu_etag)
    st, h, text = req('PUT', 'probe/copy-etag', b'',
                      {'x-amz-copy-source': '/%s/probe/plain.bin' % BUCKET})
    out('copy_result_etag', quoting(tag(text, 'ETag')))

    # conditional writes
    st, _, text = req('PUT', 'probe/plain.bin', b'other', {'If-None-Match': '*'})
    out('put_if_none_match', {'412': 'honoured (412)', '200': '**ignored** (overwrites)'}.get(
        str(st), answer(st, text)))
    st, _, text = req('PUT', 'probe/copy-etag', b'', {
        'x-amz-copy-source': '/%s/probe/plain.bin' % BUCKET, 'If-None-Match': '*'})
    out('copy_if_none_match', {'412': 'honoured (412)', '200': '**ignored** (overwrites)'}.get(
        str(st), answer(st, text)))
    st, _, text = req('GET', 'probe/plain.bin', headers={'If-Match': '"0123456789abcdef0123456789abcdef"'})
    out('get_if_match', {'412': 'honoured (412)', '200': '**ignored**'}.get(str(st), answer(st, text)))

    # ListMultipartUploads by prefix, with one upload open under it
    open_upload = create('probe/open/a.bin')
    st, _, text = req('GET', '?uploads&prefix=' + qid('probe/open/'))
    if st == 200:
        out('list_uploads', 'yes' if open_upload in text else '**does not list an open upload**')
    else:
        out('list_uploads', '**missing** (%s)' % answer(st, text))
    st, _, text = req('DELETE', 'probe/open/a.bin?uploadId=%s' % qid(open_upload))
    out('abort_upload', 'yes' if st == 204 else answer(st, text))

    # the part number limit, learnt from the answers
    upload = create('probe/limit.bin')
    got = {}
    for n in (1000, 1001, 10000, 10001):
        st, _, text = part('probe/limit.bin', upload, n, b'x')
        got[n] = answer(st, text)
    if got[1000] == '200' and got[1001] != '200':
        out('part_limit', '**1,000** (part 1001: %s)' % got[1001])
    elif got[10000] == '200' and got[10001] != '200':
        out('part_limit', '10,000 (part 10001: %s)' % got[10001])
    elif all(a == '200' for a in got.values()):
        out('part_limit', 'none seen (part 10001: 200)')
    else:
        out('part_limit', 'parts 1000, 1001, 10000, 10001: %s' % ', '.join(got[n] for n in sorted(got)))
    req('DELETE', 'probe/limit.bin?uploadId=%s' % qid(upload))

    # completing with a subset of the parts; what is left of the others
    key = 'probe/subset.bin'
    upload = create(key)
    ps = []
    for n in (1, 2):
        st, h, text = part(key, upload, n, bytes([n]) * (5 * MIB))
        ps.append((n, h['ETag']))
    st, _, text = complete(key, upload, ps[:1])
    if st == 200 and '<Error>' not in text:
        size = int(req('HEAD', key)[1]['Content-Length'])
        st2, _, text2 = req('GET', '?uploads&prefix=' + qid('probe/subset'))
        listed = st2 == 200 and upload in text2
        out('complete_subset', 'accepted (the object is %s)%s' % (
            'the subset' if size == 5 * MIB else '%d bytes' % size,
            '; the upload is still listed' if listed else ''))
    else:
        out('complete_subset', '**refused** (%s)' % answer(st, text))
    # (store.sh looks for what survives these two on stores that show it)
    req('DELETE', key)
    req('DELETE', key + '?uploadId=%s' % qid(upload))

    # checksums: a wrong SHA-256 checksum header, a wrong Content-MD5
    wrong_sha = base64.b64encode(hashlib.sha256(b'other').digest()).decode()
    st, _, text = req('PUT', 'probe/sum.bin', small, {'x-amz-checksum-sha256': wrong_sha})
    out('checksum_sha256', 'refused (%s)' % answer(st, text) if st != 200 else '**ignored** (200)')
    wrong_md5 = base64.b64encode(hashlib.md5(b'other').digest()).decode()
    st, _, text = req('PUT', 'probe/md5.bin', small, {'Content-MD5': wrong_md5})
    out('content_md5', 'refused (%s)' % answer(st, text) if st != 200 else '**ignored** (200)')
    st, _, text = req('GET', 'probe/missing.bin')
    out('error_message', '%s, `<Message>` %s' % (answer(st, text), 'set' if tag(text, 'Message') else '**empty**'))

    # ETag spelling in ListObjectsV2
    st, _, text = req('GET', '?list-type=2&prefix=' + qid('probe/plain.bin'))
    out('list_etag', quoting(tag(text, 'ETag')))


if __name__ == '__main__':
    main()
