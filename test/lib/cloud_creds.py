# cloud_creds.py PORT LIFETIME TOKEN STS_ENDPOINT|- ACCESS_KEY SECRET [ROLE_ARN]
#
# A stand-in for the two credential endpoints that exist only inside a
# cloud, following AWS's documented protocols, on 127.0.0.1:PORT:
#   - the container credentials endpoint (ECS, EKS Pod Identity):
#     GET /container with "Authorization: TOKEN";
#   - IMDSv2: PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds,
#     then GET /latest/meta-data/iam/security-credentials/ (the role's
#     name) and .../remora-role with X-aws-ec2-metadata-token.
# Each hands out credentials that expire LIFETIME seconds later: with an
# STS endpoint, fresh ones from its AssumeRole of ROLE_ARN with
# ACCESS_KEY/SECRET (Ceph RGW's STS: the store then checks them, and
# refuses them once expired); with "-", ACCESS_KEY/SECRET themselves with
# a made-up session token (for a store without STS).  GET /__count: how
# many it handed out.
import datetime
import http.server
import json
import sys
import threading

import awscli  # noqa: F401  (makes awscli's botocore importable as botocore)
import botocore.session
from botocore.config import Config

port, lifetime, token, sts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
key, secret = sys.argv[5], sys.argv[6]
role = sys.argv[7] if len(sys.argv) > 7 else None
count = 0
lock = threading.Lock()
IMDS_TOKEN = 'imds-session-token'


def credentials():
    global count
    with lock:
        count += 1
        n = count
    if sts == '-':
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
        return {'AccessKeyId': key, 'SecretAccessKey': secret,
                'Token': 'standin-token-%d' % n,
                'Expiration': exp.strftime('%Y-%m-%dT%H:%M:%SZ')}
    client = botocore.session.get_session().create_client(
        'sts', endpoint_url=sts, region_name='us-east-1',
        aws_access_key_id=key, aws_secret_access_key=secret,
        config=Config(parameter_validation=False))  # RGW takes < 900 s
    c = client.assume_role(RoleArn=role, RoleSessionName='standin-%d' % n,
                           DurationSeconds=lifetime)['Credentials']
    return {'AccessKeyId': c['AccessKeyId'], 'SecretAccessKey': c['SecretAccessKey'],
            'Token': c['SessionToken'],
            'Expiration': c['Expiration'].astimezone(datetime.timezone.utc)
            .strftime('%Y-%m-%dT%H:%M:%SZ')}


class H(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body, kind='application/json'):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header('Content-Type', kind)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path != '/latest/api/token' or \
                not self.headers.get('X-aws-ec2-metadata-token-ttl-seconds'):
            return self.answer(400, '', 'text/plain')
        self.answer(200, IMDS_TOKEN, 'text/plain')

    def do_GET(self):
        if self.path == '/__count':
            return self.answer(200, str(count), 'text/plain')
        if self.path == '/container':
            if self.headers.get('Authorization') != token:
                return self.answer(401, '', 'text/plain')
            return self.answer(200, json.dumps(credentials()))
        prefix = '/latest/meta-data/iam/security-credentials/'
        if self.path.startswith(prefix):
            if self.headers.get('X-aws-ec2-metadata-token') != IMDS_TOKEN:
                return self.answer(401, '', 'text/plain')
            if self.path == prefix:
                return self.answer(200, 'remora-role', 'text/plain')
            if self.path == prefix + 'remora-role':
                c = credentials()
                c.update({'Code': 'Success', 'Type': 'AWS-HMAC'})
                return self.answer(200, json.dumps(c))
        self.answer(404, '', 'text/plain')

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
