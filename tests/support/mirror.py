"""A loopback HTTP server in the published models' layout, with faults a test can turn on.

Serves ``files`` (``{url path: bytes}``) on 127.0.0.1 from a thread, until ``close`` (also at
the end of a ``with`` block). ``faults[path]`` changes how a path is answered:

==================  =====================================================================
``"404"``, ``"204"``  that HTTP status (any three digits), with a short body but for 204 and
                    304; a 3xx without a Location
``"halfway"``       the full Content-Length, half the body, then the connection closes
``"halfway_once"``  ``"halfway"`` for the path's first request, then the file
``"declare_less"``  a Content-Length 1,000 bytes short, then the whole body
``"declare_huge"``  a Content-Length of 10**12, then the connection closes
``"stall"``         the headers, then nothing for ``stall_seconds``
``"drip"``          the headers, then one byte every ``drip_seconds`` (never idle for a
                    read timeout), for at most ``stall_seconds``
``"garbage"``       the right length of bytes that are no file format at all
``"truncated_hdf5"`` an HDF5 file of the right kind whose datasets were cut (a bad copy)
``"gzip"``          gzip-encoded (``Content-Encoding``, the encoded length declared) when
                    the request accepts gzip, as a web server compressing on the fly does
``"gzip_anyway"``   gzip-encoded whatever the request accepts (a misconfigured server)
``"gzip_bomb"``     gzip-encoded zeros, ``bomb_bytes`` of them decoded, whatever is accepted
``"endless"``       no Content-Length, then zeros until the client closes the connection
``"bad_length"``    a Content-Length of ``bad_length`` (``"-1"``), the body, then the
                    connection held open for ``stall_seconds``
``"undeclared"``    no Content-Length: the body, then the connection closes
==================  =====================================================================

``redirects[path] = location`` answers ``path`` with a 302 to ``location`` instead.
``requests`` counts the GET requests per path.
"""

import collections
import gzip
import http.server
import threading
import time


class ModelMirror:
    def __init__(self, files):
        self.files = dict(files)
        self.faults = {}
        self.redirects = {}
        self.bomb_bytes = 64 << 20
        self.bad_length = "-1"
        self.requests = collections.Counter()
        self.stall_seconds = 3.0
        self.drip_seconds = 0.1
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                mirror.requests[self.path] += 1
                body = mirror.files.get(self.path)
                fault = mirror.faults.get(self.path)
                if fault == "halfway_once":
                    fault = "halfway" if mirror.requests[self.path] == 1 else None
                if self.path in mirror.redirects:
                    self.send_response(302)
                    self.send_header("Location", mirror.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if body is None or (fault or "").isdigit():
                    status = int(fault) if fault else 404
                    self.send_response(status)
                    empty = status in (204, 304)
                    self.send_header("Content-Length", "0" if empty else "9")
                    self.end_headers()
                    self.wfile.write(b"" if empty else b"no such\n\n")
                    return
                if fault == "endless":
                    self.send_response(200)
                    self.end_headers()
                    try:
                        while True:
                            self.wfile.write(bytes(1 << 16))
                    except OSError:  # the client cut the transfer
                        return
                if fault == "truncated_hdf5":
                    body = _without_a_dataset(body)
                if fault == "garbage":
                    body = bytes(range(256)) * (len(body) // 256 + 1)
                    body = body[: max(len(body) // 1000, 1000)]
                accepted = "gzip" in self.headers.get("Accept-Encoding", "")
                encoded = fault in ("gzip_anyway", "gzip_bomb") or (fault == "gzip" and accepted)
                if fault == "gzip_bomb":
                    body = gzip.compress(bytes(mirror.bomb_bytes), compresslevel=9)
                elif encoded:
                    body = gzip.compress(body, compresslevel=1)
                declared = mirror.bad_length if fault == "bad_length" else len(body)
                if fault == "declare_less":
                    declared -= 1000
                if fault == "declare_huge":
                    declared = 10**12
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                if fault != "undeclared":
                    self.send_header("Content-Length", str(declared))
                if encoded:
                    self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                if fault == "declare_huge":
                    self.close_connection = True
                    return
                if fault == "stall":
                    time.sleep(mirror.stall_seconds)
                    self.close_connection = True
                    return
                if fault == "drip":
                    self.close_connection = True
                    end = time.monotonic() + mirror.stall_seconds
                    try:
                        for byte in body:
                            if time.monotonic() > end:
                                return
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(mirror.drip_seconds)
                    except OSError:  # the client cut the transfer
                        return
                    return
                if fault == "bad_length":
                    self.wfile.write(body)
                    self.wfile.flush()
                    time.sleep(mirror.stall_seconds)
                    self.close_connection = True
                    return
                if fault == "halfway":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _without_a_dataset(data):
    """An HDF5 file's bytes with its last dataset deleted: a file h5py opens, that fails the
    loader's checks."""
    import io

    import h5py

    source, target = io.BytesIO(data), io.BytesIO()
    with h5py.File(source, "r") as f, h5py.File(target, "w") as out:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names[:-1]:
            out.create_dataset(name, data=f[name][...])
    return target.getvalue()
