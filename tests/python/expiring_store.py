"""A loopback S3 API server for tests whose credentials expire: an
in-memory store that checks AWS Signature Version 4 on every request and
accepts temporary credentials only while they last, so that a test can
see a client refresh its credentials in time (or fail to).

Credentials (the class-level scheme, the same for every server): time
window w = floor(t / WINDOW) has key id "ASIATEST{w}", secret
hex(HMAC-SHA256(b"master", str(w))) and session token "token-{w}"; a
request with token-w is accepted while t < w * WINDOW + LIFETIME
(20 s), else answered 400 ExpiredToken; an x-amz-date more than 15 min
from the server's `clock` (time.time unless given) is 403
RequestTimeTooSkewed. `static_keys` may add long-term
key pairs (no token). Per token (a static key: its key id),
`tokens_used` counts the requests it authenticated; `rejections`
counts the error answers by code, and `expired_tokens` the requests
refused per expired token.

S3 API, path-style (http://127.0.0.1:PORT/bucket/key): ListObjectsV2
(GET /bucket?list-type=2 with prefix, delimiter, continuation-token,
max-keys, start-after), HEAD, GET (Range: bytes=a-b, a- or -n gives 206
with Content-Range; If-Match) and PUT of objects. Signatures: the
canonical request is rebuilt from the Authorization header's
SignedHeaders and the request's own headers, raw path, query
(re-encoded, sorted) and x-amz-content-sha256, in scope
<date>/<region>/s3/aws4_request; a mismatch is 403
SignatureDoesNotMatch.

Credential endpoints for the same scheme: write_credential_process()
writes an executable credential_process script (it prints the current
window's credentials, Expiration = w * WINDOW + LIFETIME), and GET
/creds on the server answers as a container credentials endpoint to a
request whose Authorization header is `container_token`. Standard
library only.
"""

import base64
import collections
import datetime
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import re
import stat
import sys
import threading
import time
import urllib.parse
import uuid
from xml.sax.saxutils import escape

WINDOW = 10  # Seconds a window lasts; a new key each.
LIFETIME = 20  # Seconds a window's token is accepted from its start.
MASTER = b"master"
CONTAINER_PATH = "/creds"
MAX_SKEW = 15 * 60  # As S3: an x-amz-date further off is RequestTimeTooSkewed.


def window(t):
    """The window of time `t` (seconds since the epoch)."""
    return int(t // WINDOW)


def credentials(w):
    """Window `w`'s credentials: key id, secret, token, expiry (epoch s)."""
    return {
        "AccessKeyId": f"ASIATEST{w}",
        "SecretAccessKey": hmac.new(MASTER, str(w).encode(), hashlib.sha256).hexdigest(),
        "SessionToken": f"token-{w}",
        "Expires": w * WINDOW + LIFETIME,
    }


def iso8601(t):
    return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def provider_json(t, token_member):
    """The credentials of time `t` as a credential provider answers them:
    "SessionToken" for credential_process (with Version), "Token" for a
    container endpoint."""
    c = credentials(window(t))
    out = {"AccessKeyId": c["AccessKeyId"], "SecretAccessKey": c["SecretAccessKey"],
           token_member: c["SessionToken"], "Expiration": iso8601(c["Expires"])}
    if token_member == "SessionToken":
        out["Version"] = 1
    return out


def write_credential_process(folder, name="expiring-credentials"):
    """An executable credential_process at folder/name (run by this
    Python) that prints the credentials of the time it runs, and appends
    that window to folder/name.calls; returns its path."""
    path = os.path.join(folder, name)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(path, "w") as f:
        f.write(f"""#!{sys.executable}
import json, sys, time
sys.path.insert(0, {here!r})
import expiring_store
now = time.time()
with open(__file__ + ".calls", "a") as calls:
    calls.write(f"{{expiring_store.window(now)}}\\n")
print(json.dumps(expiring_store.provider_json(now, "SessionToken")))
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def uri_encode(text):
    """SigV4's encoding: all but A-Za-z0-9-_.~ as %XX of the UTF-8 bytes."""
    return urllib.parse.quote(text, safe="-_.~")


def query_pairs(raw):
    """The (name, value) pairs of a raw query, %-decoded ('+' is '+')."""
    pairs = []
    for part in raw.split("&") if raw else []:
        name, _, value = part.partition("=")
        pairs.append((urllib.parse.unquote(name), urllib.parse.unquote(value)))
    return pairs


def canonical_query(raw):
    """The raw query as SigV4 signs it: each name and value encoded anew,
    sorted."""
    pairs = sorted((uri_encode(n), uri_encode(v)) for n, v in query_pairs(raw))
    return "&".join(f"{n}={v}" for n, v in pairs)


def signing_key(secret, date, region, service="s3"):
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signature(secret, method, raw_path, raw_query, headers, signed, payload_hash, amz_date,
              region):
    """The SigV4 signature of a request: `headers` maps lower-cased names
    to lists of values; `signed` is the SignedHeaders list."""
    canonical_headers = "".join(
        name + ":" + ",".join(re.sub(r"\s+", " ", v.strip()) for v in headers.get(name, [])) + "\n"
        for name in signed)
    canonical = "\n".join([method, raw_path, canonical_query(raw_query), canonical_headers,
                           ";".join(signed), payload_hash])
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    return hmac.new(signing_key(secret, amz_date[:8], region), to_sign.encode(),
                    hashlib.sha256).hexdigest()


class Refused(Exception):
    """An S3 error answer: HTTP status, code, message."""

    def __init__(self, status, code, message, token=None):
        super().__init__(message)
        self.status, self.code, self.message, self.token = status, code, message, token


Object = collections.namedtuple("Object", "data etag modified")


class ExpiringStore(http.server.ThreadingHTTPServer):
    """The server on 127.0.0.1 (a free port unless told), serving from a
    thread of its own once started; `url` is its endpoint."""

    daemon_threads = True
    window = staticmethod(window)
    credentials = staticmethod(credentials)

    def __init__(self, region="us-east-1", container_token="container-token", static_keys=None,
                 clock=time.time, port=0):
        super().__init__(("127.0.0.1", port), _Handler)
        self.region = region
        self.container_token = container_token
        self.static_keys = dict(static_keys or {})
        self.clock = clock
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.lock = threading.Lock()
        self.buckets = {}  # name -> {key: Object}
        self.tokens_used = collections.Counter()
        self.rejections = collections.Counter()
        self.expired_tokens = collections.Counter()
        self.container_requests = 0
        self._thread = None

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # A client that hung up.
            super().handle_error(request, client_address)

    def start(self):
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def put(self, bucket, key, data=b""):
        """Stores `data` at bucket/key (the bucket made if need be)."""
        with self.lock:
            self.buckets.setdefault(bucket, {})[key] = Object(
                bytes(data), hashlib.md5(data).hexdigest(), self.clock())

    def make_bucket(self, bucket):
        with self.lock:
            self.buckets.setdefault(bucket, {})

    def verify(self, method, raw_path, raw_query, headers):
        """What a correctly signed request with unexpired credentials used:
        its session token, or for a static key its key id; Refused
        otherwise. `headers` maps lower-cased names to lists of values."""
        auth = (headers.get("authorization") or [""])[0]
        m = re.fullmatch(r"AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)"
                         r"/aws4_request,\s*SignedHeaders=([a-z0-9;\-]+),"
                         r"\s*Signature=([0-9a-f]{64})", auth.strip())
        if not m:
            raise Refused(403, "AccessDenied", "no AWS4-HMAC-SHA256 Authorization header")
        key_id, date, region, service, signed, got = m.groups()
        signed = signed.split(";")
        amz_date = (headers.get("x-amz-date") or [""])[0]
        payload_hash = (headers.get("x-amz-content-sha256") or [""])[0]
        if "host" not in signed or not payload_hash:
            raise Refused(400, "InvalidRequest", "host must be signed and x-amz-content-sha256 set")
        if region != self.region or service != "s3" or amz_date[:8] != date:
            raise Refused(403, "SignatureDoesNotMatch",
                          f"scope {date}/{region}/{service} is not {amz_date[:8]}/{self.region}/s3")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            raise Refused(403, "AccessDenied", "x-amz-date is not YYYYMMDDTHHMMSSZ") from None
        now = self.clock()
        if abs(now - when) > MAX_SKEW:
            raise Refused(403, "RequestTimeTooSkewed", "x-amz-date is too far from now")
        token = (headers.get("x-amz-security-token") or [None])[0]
        if key_id in self.static_keys:
            secret, token = self.static_keys[key_id], key_id
        else:
            w = re.fullmatch(r"ASIATEST(\d+)", key_id)
            if not w:
                raise Refused(403, "InvalidAccessKeyId", f"no key id {key_id}")
            c = credentials(int(w.group(1)))
            if token != c["SessionToken"]:
                raise Refused(403, "InvalidToken", "the token is not the key id's", token)
            if now >= c["Expires"]:
                raise Refused(400, "ExpiredToken", "The provided token has expired.", token)
            secret = c["SecretAccessKey"]
        want = signature(secret, method, raw_path, raw_query, headers, signed, payload_hash,
                         amz_date, region)
        if not hmac.compare_digest(want, got):
            raise Refused(403, "SignatureDoesNotMatch",
                          "The request signature we calculated does not match the signature "
                          "you provided.", token)
        return token

    def list_objects(self, bucket, query):
        """ListObjectsV2's XML for the query's parameters (a dict)."""
        arg = query.get
        prefix, delimiter = arg("prefix", ""), arg("delimiter", "")
        try:
            max_keys = max(0, min(int(arg("max-keys", "1000")), 1000))
        except ValueError:
            raise Refused(400, "InvalidArgument", "max-keys is not a number") from None
        token = arg("continuation-token", "")
        after, skip_prefix = arg("start-after", ""), ""
        if token:
            try:
                after, skip_prefix = json.loads(base64.urlsafe_b64decode(token.encode()))
            except (TypeError, ValueError):
                raise Refused(400, "InvalidArgument", "bad continuation-token") from None
        with self.lock:
            if bucket not in self.buckets:
                raise Refused(404, "NoSuchBucket", f"no bucket {bucket}")
            objects = sorted(self.buckets[bucket].items())
        contents, prefixes, last, truncated = [], [], None, False
        for key, obj in objects:
            if not key.startswith(prefix) or key <= after:
                continue
            if skip_prefix and key.startswith(skip_prefix):
                continue
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            common = key[:cut + len(delimiter)] if cut >= 0 else None
            if common is not None and prefixes and prefixes[-1] == common:
                continue
            if len(contents) + len(prefixes) >= max_keys:
                truncated = last is not None
                break
            if common is not None:
                prefixes.append(common)
                last = (key, common)
            else:
                contents.append((key, obj))
                last = (key, "")
        xml = ['<?xml version="1.0" encoding="UTF-8"?>\n'
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"]
        if delimiter:
            xml.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        xml.append(f"<MaxKeys>{max_keys}</MaxKeys><KeyCount>{len(contents) + len(prefixes)}"
                   f"</KeyCount><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if token:
            xml.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if truncated:
            nxt = base64.urlsafe_b64encode(json.dumps(last).encode()).decode()
            xml.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
        for key, obj in contents:
            modified = datetime.datetime.fromtimestamp(obj.modified, tz=datetime.timezone.utc)
            xml.append(f"<Contents><Key>{escape(key)}</Key><LastModified>"
                       f"{modified.strftime('%Y-%m-%dT%H:%M:%S.000Z')}</LastModified>"
                       f"<ETag>&quot;{obj.etag}&quot;</ETag><Size>{len(obj.data)}</Size>"
                       "<StorageClass>STANDARD</StorageClass></Contents>")
        for p in prefixes:
            xml.append(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>")
        xml.append("</ListBucketResult>")
        return "".join(xml).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ExpiringStore"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._serve("GET")

    def do_HEAD(self):
        self._serve("HEAD")

    def do_PUT(self):
        self._serve("PUT")

    def _send(self, status, body=b"", headers=(), head=False):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", uuid.uuid4().hex[:16])
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _refuse(self, r, head):
        with self.server.lock:
            self.server.rejections[r.code] += 1
            if r.code == "ExpiredToken":
                self.server.expired_tokens[r.token] += 1
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{r.code}</Code>'
                f"<Message>{escape(r.message)}</Message></Error>").encode()
        self._send(r.status, b"" if head else body, [("Content-Type", "application/xml")], head)

    def _serve(self, method):
        head = method == "HEAD"
        raw_path, _, raw_query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if method == "GET" and raw_path == CONTAINER_PATH:
            return self._container()
        headers = collections.defaultdict(list)
        for name, value in self.headers.items():
            headers[name.lower()].append(value)
        try:
            token = self.server.verify(method, raw_path, raw_query, headers)
            payload_hash = headers["x-amz-content-sha256"][0]
            if (re.fullmatch(r"[0-9a-f]{64}", payload_hash)
                    and hashlib.sha256(body).hexdigest() != payload_hash):
                raise Refused(400, "XAmzContentSHA256Mismatch", "the body's SHA-256 differs")
            with self.server.lock:
                self.server.tokens_used[token] += 1
            bucket, _, key = urllib.parse.unquote(raw_path[1:]).partition("/")
            query = dict(query_pairs(raw_query))
            if not bucket:
                raise Refused(400, "InvalidRequest", "path-style requests only")
            if not key:
                if method == "PUT":
                    self.server.make_bucket(bucket)
                    return self._send(200)
                if method != "GET" or query.get("list-type") != "2":
                    raise Refused(501, "NotImplemented", "only ListObjectsV2 on a bucket")
                return self._send(200, self.server.list_objects(bucket, query),
                                  [("Content-Type", "application/xml")])
            if method == "PUT":
                with self.server.lock:
                    if bucket not in self.server.buckets:
                        raise Refused(404, "NoSuchBucket", f"no bucket {bucket}")
                self.server.put(bucket, key, body)
                return self._send(200, headers=[("ETag", f'"{hashlib.md5(body).hexdigest()}"')])
            self._object(bucket, key, head)
        except Refused as r:
            self._refuse(r, head)

    def _object(self, bucket, key, head):
        with self.server.lock:
            if bucket not in self.server.buckets:
                raise Refused(404, "NoSuchBucket", f"no bucket {bucket}")
            obj = self.server.buckets[bucket].get(key)
        if obj is None:
            raise Refused(404, "NoSuchKey", "The specified key does not exist.")
        want = self.headers.get("If-Match")
        if want is not None and want.strip() not in (f'"{obj.etag}"', obj.etag, "*"):
            raise Refused(412, "PreconditionFailed", "If-Match does not match the ETag")
        size, status, data = len(obj.data), 200, obj.data
        headers = [("ETag", f'"{obj.etag}"'), ("Accept-Ranges", "bytes"),
                   ("Content-Type", "application/octet-stream"),
                   ("Last-Modified", email.utils.formatdate(obj.modified, usegmt=True))]
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", (self.headers.get("Range") or "").strip())
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                first = int(m.group(1))
                last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:
                first, last = max(size - int(m.group(2)), 0), size - 1
            if first >= size or last < first:
                raise Refused(416, "InvalidRange", "The requested range is not satisfiable")
            status, data = 206, obj.data[first:last + 1]
            headers.append(("Content-Range", f"bytes {first}-{last}/{size}"))
        self._send(status, data, headers, head)

    def _container(self):
        with self.server.lock:
            self.server.container_requests += 1
        if self.headers.get("Authorization") != self.server.container_token:
            return self._send(401, b'{"Message": "bad or missing Authorization"}',
                              [("Content-Type", "application/json")])
        body = json.dumps(provider_json(self.server.clock(), "Token")).encode()
        self._send(200, body, [("Content-Type", "application/json")])


if __name__ == "__main__":
    with ExpiringStore(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0) as store:
        print(store.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
