"""bench/serve.py: what the Python bench scripts share (footprint.py, membership_join.py).

A `tokentriage serve` in a directory of its own, a loopback port the kernel hands out, and a
poll with a deadline; imported, never run.
"""
import os
import signal
import socket
import subprocess
import time


def free_port(kind=socket.SOCK_STREAM, both=False):
    """A loopback port the kernel hands out (free for UDP and TCP when both)."""
    for _ in range(50):
        s = socket.socket(socket.AF_INET, kind)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        if both:
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                t.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            t.close()
        s.close()
        return port
    raise RuntimeError("no free port")


def wait(pred, deadline_s, pause_s=0.01):
    """Calls pred every pause_s until it is true, for at most deadline_s; then once more."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(pause_s)
    return pred()


class Serve:
    """One `tokentriage serve` in ROOT/NAME (config.yaml, tt.sock, stderr.log), started by
    spawn(config) and stopped by stop(): the signal, then SIGKILL after `grace` seconds."""

    def __init__(self, build, root, name):
        self.cli = os.path.join(build, "cmd", "tokentriage")
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.socket = os.path.join(self.dir, "tt.sock")
        self.config = os.path.join(self.dir, "config.yaml")
        self.log = os.path.join(self.dir, "stderr.log")
        self.proc = None

    def spawn(self, config):
        with open(self.config, "w") as f:
            f.write(config)
        self.spawned = time.monotonic()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([self.cli, "serve", "-c", self.config],
                                         stdout=subprocess.DEVNULL, stderr=log)

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, grace=5):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
