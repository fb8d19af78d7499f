#!/usr/bin/env bash
#
# Cloud credentials and encryption end to end (doc/operator-guide.md,
# "Cloud credentials"), by background workers or remora-worker
# (REMORA_HOST):
#   - the credential chain: the workers take credentials from a container
#     endpoint (background workers: the server's environment names it) or
#     IMDSv2 (remora-worker), stand-ins that follow AWS's protocols
#     (test/lib/cloud_creds.py).  On Ceph RGW they are the STS credentials
#     of a role that a user whose own keys cannot write the bucket may
#     assume, 20 s long: a 30 s transfer outlives two of them and succeeds
#     in its first attempt, the store refusing expired ones;
#     remora_workers says where they came from, and remora.worker_settings
#     sends remora-worker no key;
#   - on RGW: static temporary credentials with their session token; a role
#     assumed on top of static keys (remora.s3_role_arn); a source endpoint
#     read through a role; a web identity (an OpenID Connect token that
#     RGW's STS verifies against its provider, nginx over TLS); SSE-KMS and SSE-C on every object written
#     (members, single PUTs, manifests, exports), each with a resume after
#     kill -9, an SSE-C object unreadable without its key, remora_presign
#     refused (0A000) under SSE-C;
#   - no secret (keys, session tokens, the SSE-C key) in a log, a view or
#     pg_settings for a non-superuser.
# The test server has no STS and no encryption: there the chain's
# stand-ins hand out its own keys with a made-up session token, and the
# rest is RGW's.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin cloud

stack_services
on_rgw() { [ "${REMORA_STORE:-s3rver}" = rgw ]; }
rgw_aws() { AWS_ACCESS_KEY_ID=$1 AWS_SECRET_ACCESS_KEY=$2 AWS_SESSION_TOKEN=${3:-} \
	AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
	/usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" --no-cli-pager "${@:4}"; }
LIMITED_KEY=LIMITEDKEY
LIMITED_SECRET="limited-secret-$RANDOM$RANDOM"
ROLE=arn:aws:iam:::role/remora-writer
if on_rgw; then
	# a user whose own keys may not write the bucket, and a role it may
	# assume that may
	rgw_admin "$T/store" user create --uid limited --display-name limited \
		--access-key "$LIMITED_KEY" --secret-key "$LIMITED_SECRET" >/dev/null 2>&1
	rgw_admin "$T/store" caps add --uid "$RGW_UID" --caps "roles=*" >/dev/null 2>&1
	aws_s3 iam create-role --role-name remora-writer --assume-role-policy-document \
		'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/limited"]},"Action":["sts:AssumeRole"]}]}' >/dev/null
	aws_s3 iam put-role-policy --role-name remora-writer --policy-name s3 --policy-document \
		'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::target","arn:aws:s3:::target/*"]}]}' >/dev/null
	# objects a role's sessions write belong to the limited user: the
	# bucket's owner reads them (to check them here) by the bucket's policy
	aws_s3 s3api put-bucket-policy --bucket target --policy \
		'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/remora"]},"Action":["s3:*"],"Resource":["arn:aws:s3:::target","arn:aws:s3:::target/*"]}]}'
	echo probe >"$T/probe.txt"
	limited_cannot_write() { ! rgw_aws "$LIMITED_KEY" "$LIMITED_SECRET" "" s3 cp "$T/probe.txt" s3://target/probe.txt >/dev/null 2>&1; }
	check "the limited user's own keys may not write the bucket" limited_cannot_write
	STANDIN_ARGS=(20 "Bearer pod-token" "http://127.0.0.1:$S3_PORT" "$LIMITED_KEY" "$LIMITED_SECRET" "$ROLE")
else
	STANDIN_ARGS=(20 "Bearer pod-token" - "$S3_ACCESS_KEY" "$S3_SECRET_KEY")
fi

# the platform's credential endpoints
CREDS_PORT=$(free_port)
python3 test/lib/cloud_creds.py "$CREDS_PORT" "${STANDIN_ARGS[@]}" >"$T/creds.log" 2>&1 &
CREDS_PID=$!
e2e_at_exit "kill $CREDS_PID"
wait_port "$CREDS_PORT" || { not_ok "the credential stand-in starts"; exit 1; }
handed() { curl -s "http://127.0.0.1:$CREDS_PORT/__count"; }

# background workers: the container endpoint, from the server's
# environment; remora-worker: IMDSv2 (its environment names no container)
if ! host_is_external; then
	export AWS_CONTAINER_CREDENTIALS_FULL_URI="http://127.0.0.1:$CREDS_PORT/container"
	export AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer pod-token"
fi
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent
e2e_cluster < <(
	stack_settings | grep -v -e s3_access_key_id -e s3_secret_access_key
	echo "remora.s3_credentials = 'chain'"
	echo "remora.imds_endpoint = 'http://127.0.0.1:$CREDS_PORT'"
	echo "log_min_messages = info"
)
unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN
q "CREATE EXTENSION remora" >/dev/null
if host_is_external; then
	q "CREATE ROLE rhost LOGIN; GRANT remora_worker TO rhost" >/dev/null
	for _ in $(seq "$HOST_WORKERS"); do start_host_worker; done
	check_eq "remora.worker_settings sends remora-worker no key with the chain" \
		"$(q "SELECT s3_credentials || ':' || coalesce(s3_access_key_id, '') || ':' || coalesce(s3_secret_access_key, '') FROM remora.worker_settings()")" "chain::"
fi

# --- the chain: credentials that expire during a transfer
make_file long.bin $((30 * 1024 * 1024))
j=$(q "SELECT remora_submit('$SRC/slow/long.bin')")
check "a 30 s transfer with 20 s credentials succeeds" wait_state "$j" succeeded 180
check_eq "in its first attempt" "$(q "SELECT attempts_used FROM remora.jobs WHERE job_id = $j")" 1
check "the credentials were fetched again while it ran ($(handed) handed out)" \
	test "$(handed)" -ge 3
verify "$j" long.bin
if host_is_external; then want_source="instance role remora-role (IMDSv2)"; else want_source="container endpoint"; fi
check_eq "remora_workers says where each worker's credentials came from" \
	"$(q "SELECT string_agg(DISTINCT credentials, ',') FROM remora_workers WHERE state = 'running'")" "$want_source"
check_eq "and when they expire: within their 20 s" \
	"$(q "SELECT bool_and(credentials_expire_at BETWEEN now() - interval '5 s' AND now() + interval '25 s') FROM remora_workers WHERE state = 'running'")" t

if ! on_rgw; then
	echo "# STS, SSE-KMS and SSE-C: on Ceph RGW (the test server has none)"
	e2e_finish
	exit
fi

set_conf() {	# set_conf "name = 'value'"...: in postgresql.auto.conf, then reload
	local line
	for line in "$@"; do q "ALTER SYSTEM SET ${line%% = *} = ${line#* = }" >/dev/null; done
	reload_workers
}
head_field() {	# head_field KEY FIELD [aws args]: a field of the object's HEAD
	local key=$1 field=$2
	shift 2
	aws_s3 s3api head-object --bucket target --key "$key" --output json "$@" 2>/dev/null | jq -r ".$field // empty"
}
member_key() { q "SELECT key FROM remora_result($1) LIMIT 1"; }
manifest_key() { q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $1"; }

# --- a role assumed on top of static keys, with an external id
set_conf "remora.s3_credentials = 'static'" "remora.s3_access_key_id = '$LIMITED_KEY'" \
	"remora.s3_secret_access_key = '$LIMITED_SECRET'" "remora.s3_role_arn = '$ROLE'" \
	"remora.s3_external_id = 'remora-e2e'" "remora.sts_endpoint = 'http://127.0.0.1:$S3_PORT'"
make_file small.bin 200000
j=$(q "SELECT remora_submit('$SRC/small.bin')")
check "a job written through a role assumed with static keys succeeds" wait_state "$j" succeeded 60
verify "$j" small.bin
workers_say() { [ "$(q "SELECT string_agg(DISTINCT credentials, ',') FROM remora_workers WHERE state = 'running'")" = "$1" ]; }
check "remora_workers names the role, at the workers' next heartbeat" \
	wait_for 20 workers_say "role $ROLE (with static)"

# --- static temporary credentials: their session token is sent
read -r TMP_KEY TMP_SECRET TMP_TOKEN < <(rgw_aws "$LIMITED_KEY" "$LIMITED_SECRET" "" sts assume-role \
	--role-arn "$ROLE" --role-session-name e2e --output json |
	jq -r '.Credentials | "\(.AccessKeyId) \(.SecretAccessKey) \(.SessionToken)"')
set_conf "remora.s3_role_arn = ''" "remora.s3_access_key_id = '$TMP_KEY'" \
	"remora.s3_secret_access_key = '$TMP_SECRET'" "remora.s3_session_token = '$TMP_TOKEN'"
jt=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'token')")
check "a job written with temporary static credentials and their token succeeds" \
	wait_state "$jt" succeeded 60
verify "$jt" small.bin

# --- a job's storage class reaches the store: RGW has STANDARD only
j=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'standard', options => '{\"storage_class\": \"STANDARD\"}')")
check "a job in the STANDARD storage class succeeds" wait_state "$j" succeeded 60
j=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'deep', options => '{\"storage_class\": \"DEEP_ARCHIVE\", \"max_attempts\": 1}')")
check "one in a class the store does not have fails" wait_state "$j" failed 60
check_eq "  refused by the store (400), for the class RGW does not place" \
	"$(q "SELECT last_error->>'class' || ' ' || (last_error->>'http_status') FROM remora.jobs WHERE job_id = $j")" "s3 400"
check "  (radosgw says so)" grep -q "invalid dest placement: default-placement/DEEP_ARCHIVE" "$T/store/log/client.rgw.a.log"

# --- a source endpoint read through a role (another account's bucket)
q "SELECT remora.register_source_endpoint('partner', 'http://127.0.0.1:$S3_PORT',
	access_key_id => '$LIMITED_KEY', secret_access_key => '$LIMITED_SECRET',
	role_arn => '$ROLE', external_id => 'partner-7')" >/dev/null
src_key=$(member_key "$jt")
j=$(q "SELECT remora_submit('s3://target/$src_key', prefix => 'via-role', options => '{\"endpoint\": \"partner\"}')")
check "an s3:// source read through the endpoint's role succeeds" wait_state "$j" succeeded 60
check_eq "with the source's bytes" "$(q "SELECT sha256 FROM remora_result($j)")" \
	"$(sha256sum "$WWW/small.bin" | cut -d' ' -f1)"

# --- SSE-KMS: every object written, a resume after kill -9, an export.
# With the bucket owner's static keys: RGW 16 refuses UploadPartCopy, the
# only copy of an encrypted object it makes, to a role's sessions (403)
set_conf "remora.s3_access_key_id = '$S3_ACCESS_KEY'" \
	"remora.s3_secret_access_key = '$S3_SECRET_KEY'" "remora.s3_session_token = ''" \
	"remora.s3_sse = 'aws:kms'" "remora.s3_sse_kms_key_id = '$RGW_KMS_KEY_ID'"
# crash_resume NAME: a 12 MiB member at 1 MB/s, its worker killed after a
# part, the job resumed from the checkpoint; the job in $j
crash_resume() {
	local pid
	make_file "$1" $((12 * 1024 * 1024))
	j=$(q "SELECT remora_submit('$SRC/slow/$1', prefix => '$1')")
	wait_for 60 validated_at_least "$j" $((5 * 1024 * 1024)) ||
		not_ok "$1: a part is validated"
	pid=$(worker_of "$j")
	[ -z "$pid" ] || kill_worker "$pid"
}
crash_resume kms.bin
check "SSE-KMS: the job killed after a part succeeds" wait_state "$j" succeeded 120
check_eq "  resumed from its checkpoint" \
	"$(q "SELECT count(*) FILTER (WHERE resumed_from IS NOT NULL) >= 1 FROM remora.attempts WHERE job_id = $j")" t
verify "$j" kms.bin
check_eq "  its member is encrypted with the KMS key" \
	"$(head_field "$(member_key "$j")" ServerSideEncryption)/$(head_field "$(member_key "$j")" SSEKMSKeyId)" \
	"aws:kms/$RGW_KMS_KEY_ID"
check_eq "  and its manifest" "$(head_field "$(manifest_key "$j")" ServerSideEncryption)" aws:kms
js=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'kms-small')")
check "SSE-KMS: a job of one PUT succeeds" wait_state "$js" succeeded 60
check_eq "  its member is encrypted" "$(head_field "$(member_key "$js")" ServerSideEncryption)" aws:kms
x=$(q "SELECT remora_export($j, 'target', 'exports/kms')")
check "SSE-KMS: an export succeeds" wait_state "$x" succeeded 60
check_eq "  its copy is encrypted with the KMS key" \
	"$(head_field exports/kms/kms.bin ServerSideEncryption)/$(head_field exports/kms/kms.bin SSEKMSKeyId)" \
	"aws:kms/$RGW_KMS_KEY_ID"
check_eq "  and has the member's bytes" \
	"$(aws_s3 s3 cp s3://target/exports/kms/kms.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	"$(sha256sum "$WWW/kms.bin" | cut -d' ' -f1)"

# --- SSE-C: the key in a file only the server's OS user reads
SSEC_RAW=remora-e2e-customer-key-32bytes!
SSEC_B64=$(printf %s "$SSEC_RAW" | base64)
printf '%s\n' "$SSEC_B64" >"$T/pg/ssec.key"
chown postgres "$T/pg/ssec.key"
chmod 600 "$T/pg/ssec.key"
set_conf "remora.s3_sse = 'customer'" "remora.s3_sse_kms_key_id = ''" \
	"remora.s3_sse_customer_key_file = '$T/pg/ssec.key'"
SSEC=(--sse-customer-algorithm AES256 --sse-customer-key "$SSEC_RAW")
crash_resume ssec.bin
check "SSE-C: the job killed after a part succeeds" wait_state "$j" succeeded 120
check_eq "  resumed from its checkpoint" \
	"$(q "SELECT count(*) FILTER (WHERE resumed_from IS NOT NULL) >= 1 FROM remora.attempts WHERE job_id = $j")" t
unreadable_without_key() { ! aws_s3 s3api head-object --bucket target --key "$1" >/dev/null 2>&1; }
check "  its member cannot be read without the key" unreadable_without_key "$(member_key "$j")"
check_eq "  and is the source's bytes with it" \
	"$(aws_s3 s3api get-object --bucket target --key "$(member_key "$j")" "${SSEC[@]}" "$T/ssec.out" >/dev/null 2>&1; sha256sum "$T/ssec.out" | cut -d' ' -f1)" \
	"$(sha256sum "$WWW/ssec.bin" | cut -d' ' -f1)"
check_eq "  its manifest is encrypted with the key too" \
	"$(head_field "$(manifest_key "$j")" SSECustomerAlgorithm "${SSEC[@]}")" AES256
x=$(q "SELECT remora_export($j, 'target', 'exports/ssec')")
check "SSE-C: an export succeeds" wait_state "$x" succeeded 60
check_eq "  its copy is encrypted with the key and has the member's bytes" \
	"$(aws_s3 s3api get-object --bucket target --key exports/ssec/ssec.bin "${SSEC[@]}" "$T/ssec-x.out" >/dev/null 2>&1; sha256sum "$T/ssec-x.out" | cut -d' ' -f1)" \
	"$(sha256sum "$WWW/ssec.bin" | cut -d' ' -f1)"
out=$(psql -X -q -t -A -v VERBOSITY=verbose -d postgres -c "SELECT remora_presign($j, 'ssec.bin')" 2>&1 || true)
check "remora_presign refuses an SSE-C object (0A000)" grep -q "0A000" <<<"$out"

# --- a web identity (EKS's IRSA): a token signed by an OpenID Connect
# provider (nginx over TLS serves its discovery document and keys) that
# RGW's STS verifies, exchanged for a role's credentials
rgw_admin "$T/store" caps add --uid "$RGW_UID" --caps "oidc-provider=*" >/dev/null 2>&1
OIDC_PORT=$(free_port)
ISS=https://127.0.0.1:$OIDC_PORT
O=$T/oidc
mkdir -p "$O/www/.well-known"
make_ca "$O" ca && make_cert "$O" ca tls
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=remora jwt signer" \
	-keyout "$O/jwt.key" -out "$O/jwt.pem" >/dev/null 2>&1
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
printf '{"issuer":"%s","jwks_uri":"%s/jwks.json","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}\n' \
	"$ISS" "$ISS" >"$O/www/.well-known/openid-configuration"
# RGW verifies with the key's certificate (x5c), not with n and e
printf '{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"k1","n":"%s","e":"AQAB","x5c":["%s"]}]}\n' \
	"$(openssl rsa -in "$O/jwt.key" -noout -modulus 2>/dev/null | sed 's/Modulus=//' | xxd -r -p | b64url)" \
	"$(openssl x509 -in "$O/jwt.pem" -outform DER | base64 -w0)" >"$O/www/jwks.json"
chmod -R a+rX "$O"
start_nginx_tls "$O" "$OIDC_PORT" "$O/tls.pem" "$O/tls.key" "$O/www" ||
	{ not_ok "the OpenID Connect provider starts"; exit 1; }
aws_s3 iam create-open-id-connect-provider --url "$ISS" --client-id-list remora \
	--thumbprint-list "$(openssl x509 -in "$O/jwt.pem" -noout -fingerprint -sha1 | sed 's/.*=//; s/://g')" >/dev/null
aws_s3 iam create-role --role-name remora-web --assume-role-policy-document \
	"{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"Federated\":[\"arn:aws:iam:::oidc-provider/127.0.0.1:$OIDC_PORT\"]},\"Action\":[\"sts:AssumeRoleWithWebIdentity\"]}]}" >/dev/null
aws_s3 iam put-role-policy --role-name remora-web --policy-name s3 --policy-document \
	'{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::target","arn:aws:s3:::target/*"]}]}'
# RGW's TLS client reads only the system's /etc/ssl/certs, which a test
# does not touch: it does not verify the provider's certificate here
ceph --admin-daemon "$T/store/run/client.rgw.a.asok" config set rgw_verify_ssl false >/dev/null
now=$(date +%s)
h=$(printf '{"alg":"RS256","typ":"JWT","kid":"k1"}' | b64url)
p=$(printf '{"iss":"%s","aud":"remora","sub":"system:serviceaccount:data:remora","iat":%d,"nbf":%d,"exp":%d}' \
	"$ISS" "$now" "$now" $((now + 3600)) | b64url)
printf '%s.%s.%s\n' "$h" "$p" "$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -sign "$O/jwt.key" -binary | b64url)" >"$T/web.jwt"
chmod 644 "$T/web.jwt"
WEB_TOKEN=$(cat "$T/web.jwt")
# the pod's environment, as EKS sets it: the workers start again with it
export AWS_WEB_IDENTITY_TOKEN_FILE=$T/web.jwt AWS_ROLE_ARN=arn:aws:iam:::role/remora-web
q "ALTER SYSTEM SET remora.s3_credentials = 'chain'" >/dev/null
q "ALTER SYSTEM SET remora.s3_sse = ''" >/dev/null
if host_is_external; then
	q "SELECT pg_reload_conf()" >/dev/null
	for pid in "${HOST_WORKER_PIDS[@]}"; do kill -TERM "$pid"; forget_host_worker "$pid"; done
	for _ in $(seq "$HOST_WORKERS"); do start_host_worker; done
else
	cluster_stop "$T/pg" fast
	cluster_start "$T/pg" >/dev/null
fi
unset AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN
j=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'web')")
check "a job written with a web identity's role succeeds" wait_state "$j" succeeded 90
verify "$j" small.bin
check "remora_workers says the web identity and its role" \
	wait_for 20 workers_say "web identity, role arn:aws:iam:::role/remora-web"

# --- no secret anywhere
secrets=("$LIMITED_SECRET" "$TMP_SECRET" "$TMP_TOKEN" "$SSEC_B64" "$SSEC_RAW" "$WEB_TOKEN")
leaked=""
for s in "${secrets[@]}"; do
	[ -n "$s" ] || continue
	if worker_logs | grep -qF -- "$s"; then leaked="$leaked log"; fi
	if grep -qF -- "$s" "$T/creds.log"; then leaked="$leaked stand-in"; fi
	if q "SELECT row_to_json(w)::text FROM remora_workers w UNION ALL SELECT row_to_json(j)::text FROM remora_jobs j UNION ALL SELECT row_to_json(a)::text FROM remora_attempts a UNION ALL SELECT row_to_json(e)::text FROM remora_source_endpoints e" | grep -qF -- "$s"; then leaked="$leaked views"; fi
done
check_eq "no key, token or SSE-C key in a log or a view" "$leaked" ""
q "CREATE ROLE snoop LOGIN IN ROLE remora_user" >/dev/null
check_eq "a non-superuser sees none of the secret settings" \
	"$(PGUSER=snoop q "SELECT count(*) FROM pg_settings WHERE name IN ('remora.s3_session_token', 'remora.s3_sse_customer_key_file', 'remora.s3_secret_access_key')")" 0
check "the server log has no crash or assertion" bash -c "! grep -qE 'TRAP|terminated by signal 11|server process .* was terminated by signal 6' '$LOG'"
e2e_finish
