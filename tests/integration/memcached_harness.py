"""Real memcached servers for the shared-tier tests, and network namespaces to put them (and
prepfs daemons) on separate hosts. Everything is started here, by the test, and stopped by its
own pid or name; addresses are loopback or the private links the test creates itself.
"""
import os
import socket
import subprocess
import time
import urllib.parse

from prepfs_harness import wait_for


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connectable(host, port, netns=None):
    if netns is None:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return True
        except OSError:
            return False
    # From inside the namespace: the test process itself stays in the host's.
    code = f"import socket; socket.create_connection(('{host}', {port}), timeout=0.2).close()"
    return subprocess.run(netns.prefix() + ["/usr/bin/python3", "-c", code], capture_output=True).returncode == 0


class Memcached:
    """One memcached server in the foreground, as a child process."""

    def __init__(self, host="127.0.0.1", port=None, memory_mb=64, item_size="2m", netns=None):
        self.host, self.port, self.netns = host, port or free_port(), netns
        self.memory_mb, self.item_size = memory_mb, item_size
        self.proc = None
        self.start()

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def start(self):
        args = ["memcached", "-l", self.host, "-p", str(self.port), "-U", "0", "-m", str(self.memory_mb),
                "-I", self.item_size, "-t", "2"]
        if os.geteuid() == 0:
            args += ["-u", "root"]
        self.proc = subprocess.Popen((self.netns.prefix() if self.netns else []) + args,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: self.proc.poll() is not None or _connectable(self.host, self.port, self.netns),
                     what=f"memcached on {self.address}")
        except BaseException:  # not answering in time: it must not outlive the test that started it
            self.kill()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"memcached on {self.address} exited with {self.proc.returncode}")

    def kill(self):
        """SIGKILL: what a crashed server does (its items are gone)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.kill()

    # ---- a tiny text-protocol client, enough to look inside and to corrupt values ----
    def _conn(self):
        return socket.create_connection((self.host, self.port), timeout=5)

    def keys(self):
        """Every key the server holds (lru_crawler metadump)."""
        with self._conn() as s:
            s.sendall(b"lru_crawler metadump all\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                part = s.recv(1 << 16)
                if not part:
                    break
                data += part
        keys = []
        for line in data.decode().splitlines():
            if line.startswith("key="):
                keys.append(urllib.parse.unquote(line.split()[0][4:]))
        return keys

    def get(self, key):
        with self._conn() as s:
            s.sendall(f"get {key}\r\n".encode())
            data = b""
            while not data.endswith(b"END\r\n"):
                part = s.recv(1 << 20)
                if not part:
                    break
                data += part
        if data.startswith(b"END"):
            return None
        header, rest = data.split(b"\r\n", 1)
        length = int(header.split()[3])
        return rest[:length]

    def set(self, key, value):
        with self._conn() as s:
            s.sendall(f"set {key} 0 0 {len(value)}\r\n".encode() + value + b"\r\n")
            assert s.recv(100).startswith(b"STORED")

    def stats(self):
        with self._conn() as s:
            s.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                data += s.recv(1 << 16)
        return {l.split()[1]: l.split()[2] for l in data.decode().splitlines() if l.startswith("STAT ")}


def shared_option(servers):
    return "shared=memcached://" + ",".join(m.address for m in servers)


class NetNs:
    """A network namespace made by the test (ip netns add), deleted with everything in it."""

    def __init__(self, name):
        self.name = name
        subprocess.run(["ip", "netns", "add", name], check=True)
        self.ip("link", "set", "lo", "up")

    def prefix(self):
        # nsenter switches the network namespace only: FUSE mounts made inside stay visible to
        # the test (`ip netns exec` would also enter a new mount namespace).
        return ["nsenter", f"--net=/run/netns/{self.name}"]

    def ip(self, *args):
        subprocess.run(["ip", "-n", self.name, *args], check=True)

    def delete(self):
        subprocess.run(["ip", "netns", "del", self.name], stderr=subprocess.DEVNULL)


class Network:
    """Hosts on one private subnet: a bridge in the first namespace (the memcached host), and one
    veth link from it to each other namespace (the nodes)."""

    def __init__(self, tag, nodes, subnet="10.203.0"):
        self.subnet = subnet
        self.hub = NetNs(f"pfs{tag}h")
        self.nodes = []
        try:
            self.hub.ip("link", "add", "br0", "type", "bridge")
            self.hub.ip("addr", "add", f"{subnet}.1/24", "dev", "br0")
            self.hub.ip("link", "set", "br0", "up")
            for i in range(nodes):
                ns = NetNs(f"pfs{tag}n{i}")
                self.nodes.append(ns)
                outer, inner = f"pfs{tag}v{i}", "eth0"
                subprocess.run(["ip", "link", "add", outer, "netns", self.hub.name, "type", "veth", "peer", "name",
                                inner, "netns", ns.name], check=True)
                self.hub.ip("link", "set", outer, "master", "br0")
                self.hub.ip("link", "set", outer, "up")
                ns.ip("addr", "add", f"{subnet}.{i + 2}/24", "dev", inner)
                ns.ip("link", "set", inner, "up")
        except Exception:
            self.delete()
            raise

    @property
    def hub_address(self):
        return f"{self.subnet}.1"

    def delete(self):
        for ns in self.nodes:
            ns.delete()
        self.hub.delete()
