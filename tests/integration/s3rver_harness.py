"""A real S3-protocol server on loopback for the S3 tests: npm's s3rver.

s3rver is installed by npm into a directory next to the build (or $PREPFS_S3RVER_DIR) the first
time a test needs it. When that is impossible (no npm, no network) the pytest session ends with
exit code 77 and the reason on stderr, which meson reports as SKIP: the S3 tests never pass
without having run. (run_pytest.sh runs one test file per session, so this ends only the S3
tests.) s3rver accepts any signature; the SigV4 signing is checked by test_s3_sigv4.py.
"""
import fcntl
import http.client
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse

import sys

import pytest

from prepfs_harness import PREPFS_BIN

S3RVER_VERSION = "3.7.1"
ACCESS_KEY = "S3RVER"
SECRET_KEY = "s3-secret-Zq9/x"  # distinct from the key id, so a leak check can find it


def install_dir():
    d = os.environ.get("PREPFS_S3RVER_DIR")
    if d:
        return d
    build = os.path.dirname(os.path.dirname(os.path.abspath(PREPFS_BIN)))
    return os.path.join(build, "s3rver-node")


def skip_all(reason):
    sys.stderr.write(f"SKIP: {reason}\n")
    pytest.exit(f"SKIP: {reason}", returncode=77)


def ensure_s3rver():
    """Path of s3rver's entry script, installing it with npm if needed; ends the session with exit 77 if impossible."""
    d = install_dir()
    script = os.path.join(d, "node_modules", "s3rver", "bin", "s3rver.js")
    if os.path.exists(script):
        return script
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        skip_all("S3 tests need node and npm to install s3rver (scripts/install-deps.sh test)")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test processes install once
        if not os.path.exists(script):
            try:
                res = subprocess.run([npm, "install", "--prefix", d, "--no-audit", "--no-fund", "--loglevel=error",
                                      f"s3rver@{S3RVER_VERSION}"], capture_output=True, text=True, timeout=400)
            except subprocess.TimeoutExpired:
                skip_all("npm could not install s3rver within 400 s (no network?)")
            if res.returncode != 0 or not os.path.exists(script):
                skip_all(f"npm could not install s3rver: {(res.stderr or res.stdout).strip()[-400:]}")
    return script


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3rver:
    """s3rver on 127.0.0.1:port serving data_dir; stop() and start() keep the data and the port."""

    def __init__(self, data_dir, port=None):
        self.script = ensure_s3rver()
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.proc = None
        self.log = open(self.data_dir.rstrip("/") + ".s3rver.log", "ab")
        os.makedirs(self.data_dir, exist_ok=True)
        self.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        env = dict(os.environ)
        # Node 17+ lacks md4 by default, which s3rver needs for listings over 1000 keys.
        env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --openssl-legacy-provider").strip()
        self.proc = subprocess.Popen(["node", self.script, "-d", self.data_dir, "-a", "127.0.0.1",
                                      "-p", str(self.port), "--silent"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"s3rver exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("s3rver did not start listening")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # an outage, not a clean shutdown
            self.proc.wait()
        self.proc = None

    def close(self):
        self.stop()
        self.log.close()

    def _conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method, path, body=None, conn=None):
        c = conn or self._conn()
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r.status, data

    def create_bucket(self, bucket):
        status, data = self.request("PUT", "/" + bucket)
        assert status == 200, (status, data)

    def put_objects(self, bucket, objects):
        """objects: {key: bytes}. Unsigned PUTs over one keep-alive connection."""
        c = self._conn()
        try:
            for key, data in objects.items():
                path = "/" + bucket + "/" + urllib.parse.quote(key, safe="/")
                status, body = self.request("PUT", path, body=data, conn=c)
                assert status == 200, (key, status, body)
        finally:
            c.close()
