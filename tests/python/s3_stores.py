"""S3 API stores on loopback written in Python, for tests and benchmarks:
a ThreadingHTTPServer speaking the path-style API (ListObjectsV2 with
prefix, delimiter, CommonPrefixes and pages; HEAD; GET, whole or by Range,
with a quoted ETag and Content-Length). Signatures are not checked.
Listings answer at once; each bucket's GETs answer as its kind says:

  Folder    a local folder's files (the store a trainer wants).
  Drip      200, then a byte a second for as long as the client stays.
  Paced     objects sent at a bandwidth shared by every connection to that
            bucket (a store whose link is full).
  Storm     503 SlowDown at once, every time.

The store counts each bucket's GETs: in flight (a body being sent), their
most, and in all (503s included)."""

import http.server
import os
import select
import sys
import threading
import time
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape


def image_folder_keys(prefix, classes, per_class, ext=".jpg"):
    """Keys of an ImageFolder: prefix/<class>/<i><ext>."""
    return [f"{prefix}/{c}/{i}{ext}" for c in classes for i in range(per_class)]


class Counts:
    """GETs of one bucket: in flight, their most, in all."""

    def __init__(self):
        self.active = self.most = self.gets = 0


class Bucket:
    """Objects (key -> size) and how a GET of one answers: `body(handler,
    store, key, start, length)` writes that many bytes of it (headers are
    sent already), stopping early once the store closes."""

    etag = "stoker-loopback"

    def __init__(self, sizes):
        self.sizes = dict(sizes)

    def fails(self):
        """The error a GET answers at once, (status, code), or None."""
        return None

    def body(self, handler, store, key, start, length):
        raise NotImplementedError


class Folder(Bucket):
    """The files under `root` (hidden ones left out), each at
    prefix/<its relative path>; read once, kept in memory."""

    def __init__(self, root, prefix="train"):
        self.data = {}
        for dirpath, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if name.startswith("."):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    self.data[f"{prefix}/{os.path.relpath(path, root)}"] = f.read()
        super().__init__({k: len(v) for k, v in self.data.items()})

    def body(self, handler, store, key, start, length):
        handler.wfile.write(self.data[key][start:start + length])


class Drip(Bucket):
    """Objects of `size` bytes sent a byte a second, until the client
    hangs up (seen at once, not at the next byte)."""

    def __init__(self, keys, size):
        super().__init__({k: size for k in keys})

    def body(self, handler, store, key, start, length):
        for _ in range(length):
            handler.wfile.write(b"x")
            handler.wfile.flush()
            # Readable while a response is unfinished: the client closed.
            gone, _, _ = select.select([handler.connection], [], [], 1)
            if gone or store.closing.is_set():
                break


class Paced(Bucket):
    """Objects of `size` bytes sent in 64 KiB pieces at `rate` bytes a
    second in all, however many connections share it."""

    PIECE = 64 << 10

    def __init__(self, keys, size, rate):
        super().__init__({k: size for k in keys})
        self.rate = rate
        self.lock = threading.Lock()
        self.next = 0.0  # When the link is free for the next piece.

    def body(self, handler, store, key, start, length):
        zeros = bytes(self.PIECE)
        while length > 0:
            n = min(self.PIECE, length)
            with self.lock:
                at = max(time.monotonic(), self.next)
                self.next = at + n / self.rate
            if store.closing.wait(max(0.0, at - time.monotonic())):
                break
            handler.wfile.write(zeros[:n])
            length -= n


class Storm(Bucket):
    """Objects of `size` bytes whose every GET is 503 SlowDown."""

    def __init__(self, keys, size):
        super().__init__({k: size for k in keys})

    def fails(self):
        return 503, "SlowDown"


class LoopbackStore:
    """The store on 127.0.0.1 (`url`), serving `buckets` (name -> Bucket;
    the dict may be changed while it runs). `counts[bucket]` and
    `active`, `most`, `gets` (all buckets) count GETs; wait() waits on
    them."""

    def __init__(self, buckets):
        self.buckets = buckets
        self.cond = threading.Condition()
        self.counts = {}
        self.all = Counts()
        self.closing = threading.Event()
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # Headers and body go out at once.

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                store.answer(self, head=True)

            def do_GET(self):
                store.answer(self, head=False)

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 256  # Many connections open at once.
            daemon_threads = True

            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], ConnectionError):  # A client hung up.
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def active(self):
        return self.all.active

    @property
    def most(self):
        return self.all.most

    @property
    def gets(self):
        return self.all.gets

    def count(self, name):
        """`name`'s Counts (made on first use; hold self.cond)."""
        return self.counts.setdefault(name, Counts())

    def answer(self, handler, head):
        url = urlsplit(handler.path)
        bucket_name, _, key = url.path.lstrip("/").partition("/")
        key = unquote(key)
        bucket = self.buckets.get(bucket_name)
        query = parse_qs(url.query)
        if bucket is None:
            return self.error(handler, 404, "NoSuchBucket", head)
        if "list-type" in query and not key:
            body = self.listing(bucket, query).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            if not head:
                handler.wfile.write(body)
            return
        if key not in bucket.sizes:
            return self.error(handler, 404, "NoSuchKey", head)
        if not head:
            with self.cond:
                for c in (self.count(bucket_name), self.all):
                    c.gets += 1
                self.cond.notify_all()
        failure = bucket.fails()
        if failure is not None:
            return self.error(handler, *failure, head)
        size = bucket.sizes[key]
        start, length, status = 0, size, 200
        wanted = handler.headers.get("Range", "")
        if wanted.startswith("bytes=") and not head:
            first, _, last = wanted[len("bytes="):].partition("-")
            if first:
                start = int(first)
                end = min(size - 1, int(last)) if last else size - 1
            else:  # The last `last` bytes.
                start, end = max(0, size - int(last)), size - 1
            length, status = max(0, end - start + 1), 206
        handler.send_response(status)
        handler.send_header("Content-Length", str(length))
        handler.send_header("ETag", f'"{bucket.etag}"')
        if status == 206:
            handler.send_header("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
        handler.end_headers()
        if head:
            return
        self.sending(bucket_name, +1)
        try:
            bucket.body(handler, self, key, start, length)
        except OSError:
            handler.close_connection = True  # The client hung up.
        finally:
            self.sending(bucket_name, -1)
        if self.closing.is_set():
            handler.close_connection = True

    def sending(self, name, step):
        with self.cond:
            for c in (self.count(name), self.all):
                c.active += step
                c.most = max(c.most, c.active)
            self.cond.notify_all()

    @staticmethod
    def error(handler, status, code, head):
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>{code}</Message></Error>").encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/xml")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not head:
            handler.wfile.write(body)

    @staticmethod
    def listing(bucket, query):
        prefix = query.get("prefix", [""])[0]
        delimiter = query.get("delimiter", [""])[0]
        after = query.get("continuation-token", query.get("start-after", [""]))[0]
        most = int(query.get("max-keys", ["1000"])[0])
        objects, prefixes, truncated = [], [], False
        for k in sorted(bucket.sizes):
            if not k.startswith(prefix) or k <= after:
                continue
            rest = k[len(prefix):]
            p = prefix + rest.split(delimiter, 1)[0] + delimiter if delimiter else None
            if p is not None and delimiter in rest:
                if p in prefixes or p <= after:
                    continue
            if len(objects) + len(prefixes) == most:
                truncated = True
                break
            if p is not None and delimiter in rest:
                prefixes.append(p)
            else:
                objects.append(k)
        last = max(objects[-1:] + prefixes[-1:], default="")
        entries = "".join(f"<Contents><Key>{escape(k)}</Key><Size>{bucket.sizes[k]}</Size>"
                          f"<ETag>&quot;{bucket.etag}&quot;</ETag></Contents>" for k in objects)
        entries += "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>"
                           for p in prefixes)
        token = (f"<NextContinuationToken>{escape(last)}</NextContinuationToken>"
                 if truncated else "")
        return ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
                f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(objects) + len(prefixes)}"
                f"</KeyCount><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
                f"{token}{entries}</ListBucketResult>")

    def wait(self, predicate, timeout):
        """Waits until predicate(self) holds (True) or `timeout` s pass."""
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout)

    def close(self):
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
