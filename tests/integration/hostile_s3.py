"""A tiny S3-protocol server that misbehaves on purpose (fault injection for the S3 source):
just enough of ListObjectsV2 and ranged GETs for a mount, plus one fault per server:

  trickle  once armed, GETs of objects send their headers, then one byte every half second (above
           libcurl's 1 B/s low-speed limit, so only a total deadline ends them); before, they are
           answered at once (the mount's header probe reads every object)
  cycle    ListObjectsV2 hands out continuation tokens A -> B -> A -> ... forever
  bare_head  once armed, HEADs of objects answer 200 with none of Content-Length, Last-Modified
           or ETag (a proxy that strips them); GETs are answered as usual
  same_keys  ListObjectsV2 lists the same key on every page, with a new token each time, forever
  empty_pages  ListObjectsV2 answers pages with no key and a new token each time, forever
  long_token  ListObjectsV2's first page hands out a 1 MB continuation token
  far_head  once armed, HEADs of objects answer a Last-Modified in the year 9999, past what
           int64 nanoseconds hold
  no_etag  once armed, object GETs answer without an ETag (a proxy that strips it)
  same_page  ListObjectsV2 sends one page again and again, its keys descending (z, then a), with a
           new token each time: a check of each page's first key alone passes it
  wide_page  ListObjectsV2 sends pages of 1001 keys (it was asked for at most 1000), each saying
           more follow
  whole_bucket  ListObjectsV2 ignores max-keys: 1001 keys in one page, the last
  huge_size  ListObjectsV2 lists a.bin as usual beside huge.bin, whose Size is 2^64 - 1
  star_range  once armed, object GETs answer 206 with "Content-Range: bytes */1000", which does not
           say where its bytes go
  folded_etag  once armed, object GETs answer other bytes of the same size under another ETag,
           FOLDED_ETAG, whose XXH3-64 agrees with the listed one's modulo 1e9 (the part of the
           hash folded into the version's mtime_ns) but not beyond
"""
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import time

OBJECT = b"x" * 1000
# Found by a search over 2^32 candidates: XXH3_64(FOLDED_ETAG) % 1e9 == XXH3_64(LISTED_ETAG) % 1e9
# == 110593109, while the two hashes differ.
LISTED_ETAG = "0123456789abcdef0123456789abcdef"
FOLDED_ETAG = "fedcba9876543210cc7fdb1600000000"


def page(keys, next_token=None, sizes=None):
    sizes = sizes or {}
    contents = "".join(
        f"<Contents><Key>{k}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
        f"<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>{sizes.get(k, len(OBJECT))}</Size></Contents>"
        for k in keys)
    token = f"<NextContinuationToken>{next_token}</NextContinuationToken>" if next_token else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bucket</Name>'
            f"<IsTruncated>{'true' if next_token else 'false'}</IsTruncated>{token}{contents}"
            f"</ListBucketResult>").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body in one segment (flushed after each request): written apart, Nagle and the
    # client's delayed ACK cost 40 ms a request.
    wbufsize = 1 << 16

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        fault = self.server.fault
        if "list-type" in query:
            self.server.listings += 1
            token = query.get("continuation-token", [""])[0]
            if fault == "cycle":
                nxt = {"": "A", "A": "B", "B": "A"}[token]
                # Keys that rise, as a real listing's: only the tokens give the cycle away.
                return self.reply(200, page([f"ds/{self.server.listings:04d}-{token or 'first'}.bin"], nxt))
            fresh = f"t{self.server.listings}"
            if fault == "same_keys":
                return self.reply(200, page(["ds/again.bin"], fresh))
            if fault == "same_page":
                return self.reply(200, page(["ds/z.bin", "ds/a.bin"], fresh))
            if fault == "wide_page":  # keys that rise, page after page: only the width gives it away
                base = (self.server.listings - 1) * 1001
                return self.reply(200, page([f"ds/{base + i:09d}.bin" for i in range(1001)], fresh))
            if fault == "whole_bucket":
                return self.reply(200, page([f"ds/{i:04d}.bin" for i in range(1001)]))
            if fault == "huge_size":
                return self.reply(200, page(["ds/a.bin", "ds/huge.bin"], sizes={"ds/huge.bin": 2**64 - 1}))
            if fault == "empty_pages":
                return self.reply(200, page([], fresh))
            if fault == "long_token":
                return self.reply(200, page(["ds/a.bin"], "t" * 1_000_000))
            return self.reply(200, page(["ds/slow.bin"]))
        if fault == "no_etag" and self.server.armed:
            return self.reply(200, OBJECT)
        if fault == "star_range" and self.server.armed:
            return self.reply(206, b"y" * len(OBJECT), [("ETag", f'"{LISTED_ETAG}"'),
                                                       ("Content-Range", f"bytes */{len(OBJECT)}")])
        if fault == "folded_etag" and self.server.armed:
            return self.reply(200, b"y" * len(OBJECT), [("ETag", f'"{FOLDED_ETAG}"')])
        if not self.server.armed or fault != "trickle":
            return self.reply(200, OBJECT, [("ETag", '"0123456789abcdef0123456789abcdef"')])
        # An object GET: the trickle.
        self.send_response(200)
        self.send_header("Content-Length", str(len(OBJECT)))
        self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
        self.end_headers()
        try:
            for b in OBJECT:
                if self.server.closing:
                    return
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    def do_HEAD(self):
        if self.server.fault == "bare_head" and self.server.armed:
            self.send_response(200)
            self.end_headers()
            return
        if self.server.fault == "far_head" and self.server.armed:
            self.send_response(200)
            self.send_header("Content-Length", str(len(OBJECT)))  # a HEAD's: the object's, no body
            self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
            self.send_header("Last-Modified", "Fri, 31 Dec 9999 23:59:59 GMT")
            self.end_headers()
            return
        self.reply(404, b"")


class HostileS3:
    def __init__(self, fault):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.fault, self.httpd.listings, self.httpd.closing, self.httpd.armed = fault, 0, False, False
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def arm(self):
        self.httpd.armed = True

    @property
    def listings(self):
        return self.httpd.listings

    def close(self):
        self.httpd.closing = True
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
