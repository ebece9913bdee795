"""An independent SigV4 verifier (AWS's published algorithm, written from the specification in
Python) and a minimal S3-protocol server that refuses every request whose signature it cannot
reproduce. s3rver accepts any signature, so this is what proves prepfs signs correctly."""
import hashlib
import hmac
import http.server
import threading
import urllib.parse
from xml.sax.saxutils import escape


def _uri_encode(s, keep_slash):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def canonical_query(raw_query):
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        k, _, v = part.partition("=")
        k, v = urllib.parse.unquote(k), urllib.parse.unquote(v)
        pairs.append((_uri_encode(k, False), _uri_encode(v, False)))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def signature(secret, method, path, raw_query, headers, signed_headers, payload_hash, amz_date, scope):
    """headers: {lowercase name: value}. S3 signs the path as sent (no normalization)."""
    canon_headers = "".join(f"{h}:{' '.join(headers[h].strip().split())}\n" for h in signed_headers)
    creq = "\n".join([method, path, canonical_query(raw_query), canon_headers, ";".join(signed_headers),
                      payload_hash])
    date, region, service, _ = scope.split("/")
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


class VerifyingS3:
    """Serves {key: bytes} of one bucket (path style), 2 keys per listing page, ranged GETs;
    answers 403 SignatureDoesNotMatch unless the request's SigV4 signature checks out."""

    def __init__(self, bucket, objects, access_key, secret, token=None, region="us-east-1"):
        self.bucket, self.objects = bucket, dict(sorted(objects.items()))
        self.access_key, self.secret, self.token, self.region = access_key, secret, token, region
        self.checked, self.failures, self.signed_header_sets = 0, [], set()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):  # noqa: N802
                outer.handle(self, head=True)

            def do_GET(self):  # noqa: N802
                outer.handle(self, head=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def verify(self, req):
        auth = req.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return "no SigV4 Authorization header"
        fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        cred = fields["Credential"].split("/", 1)
        if cred[0] != self.access_key:
            return "wrong access key"
        scope = cred[1]
        if scope.split("/")[1:] != [self.region, "s3", "aws4_request"]:
            return f"wrong scope {scope}"
        signed = fields["SignedHeaders"].split(";")
        self.signed_header_sets.add(tuple(signed))
        need = {"host", "x-amz-date", "x-amz-content-sha256"} | ({"x-amz-security-token"} if self.token else set())
        if not need <= set(signed):
            return f"unsigned required headers: {need - set(signed)}"
        if self.token and req.headers.get("x-amz-security-token") != self.token:
            return "missing session token"
        headers = {k.lower(): v for k, v in req.headers.items()}
        if headers.get("x-amz-content-sha256") != hashlib.sha256(b"").hexdigest():
            return "bad payload hash"
        path, _, query = req.path.partition("?")
        # S3 signs the path as it re-encodes the key it decoded: each byte outside the unreserved
        # set as %XX in upper case, once. A path sent otherwise (a raw "+", lower-case hex) signs
        # here as sent but fails at AWS, so it is refused.
        if path != _uri_encode(urllib.parse.unquote(path), True):
            return f"path not in SigV4's canonical encoding (want {_uri_encode(urllib.parse.unquote(path), True)})"
        want = signature(self.secret, req.command, path, query, headers, signed, headers["x-amz-content-sha256"],
                         headers["x-amz-date"], scope)
        if not hmac.compare_digest(want, fields["Signature"]):
            return "signature mismatch"
        return None

    def reply(self, req, status, body=b"", headers=(), head=False):
        req.send_response(status)
        for k, v in headers:
            req.send_header(k, v)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if not head:
            req.wfile.write(body)

    def handle(self, req, head):
        why = self.verify(req)
        if why:
            self.failures.append(f"{req.command} {req.path}: {why}")
            body = f"<Error><Code>SignatureDoesNotMatch</Code><Message>{escape(why)}</Message></Error>".encode()
            return self.reply(req, 403, body, head=head)
        self.checked += 1
        path, _, query = req.path.partition("?")
        q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if path.rstrip("/") == "/" + self.bucket:
            prefix = q.get("prefix", "")
            keys = [k for k in self.objects if k.startswith(prefix)]
            start = int(q["continuation-token"].split("=")[-1]) if "continuation-token" in q else 0
            n = min(int(q.get("max-keys", "1000")), 2)
            page, nxt = keys[start:start + n], start + n
            truncated = nxt < len(keys)
            xml = "<ListBucketResult>" + "".join(
                f"<Contents><Key>{escape(k)}</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
                f"<ETag>&quot;{hashlib.md5(self.objects[k]).hexdigest()}&quot;</ETag>"
                f"<Size>{len(self.objects[k])}</Size></Contents>" for k in page)
            # A token with characters that need encoding in a query string.
            xml += f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
            if truncated:
                xml += f"<NextContinuationToken>t/+ ={nxt}</NextContinuationToken>"
            return self.reply(req, 200, (xml + "</ListBucketResult>").encode(), head=head)
        key = urllib.parse.unquote(path[len(self.bucket) + 2:])
        if key not in self.objects:
            return self.reply(req, 404, b"<Error><Code>NoSuchKey</Code></Error>", head=head)
        data = self.objects[key]
        etag = ("ETag", f'"{hashlib.md5(data).hexdigest()}"')
        rng = req.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), len(data) - 1)
            return self.reply(req, 206, data[a:b + 1], [etag, ("Content-Range", f"bytes {a}-{b}/{len(data)}")], head)
        return self.reply(req, 200, data, [etag], head)
