"""What the Python tests share: checks that report as they go, polls with a deadline, ports.

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
    from ttcheck import check, wait_for, connectable, free_port, failed

check() prints "ok   what" or "FAIL what" and remembers failures; a test ends with
`return summary("name")`, which prints the count and gives the exit code.
"""

import socket
import subprocess
import time

FAILED = []


def check(ok, what):
    """Reports one assertion; returns ok, so a caller can stop when a step failed."""
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)
    return ok


def failed():
    return bool(FAILED)


def summary(name):
    """Prints the outcome; the process's exit code."""
    print(f"{'FAILED' if FAILED else 'passed'}: {name} ({len(FAILED)} failure(s))", flush=True)
    return 1 if FAILED else 0


def wait_for(what, fn, deadline_s=15.0, procs=(), every_s=0.02):
    """Polls fn() until it returns a truthy value (returned), or raises TimeoutError at the
    deadline; RuntimeError at once when one of procs (Popen) has exited meanwhile."""
    end = time.monotonic() + deadline_s
    while True:
        value = fn()
        if value:
            return value
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: the process exited ({p.returncode})")
        if time.monotonic() > end:
            raise TimeoutError(f"timed out after {deadline_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def connectable(addr):
    """Whether a connection to addr (a unix socket path, or a (host, port)) is accepted."""
    s = socket.socket(socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET)
    try:
        s.connect(addr)
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop(daemon, log=None, what="the daemon"):
    """SIGTERM, and a check that it exits 0 within 30 s (a sanitizer report fails it); prints
    the tail of its log when anything failed."""
    daemon.terminate()
    try:
        rc = daemon.wait(30)
        check(rc == 0, f"{what} stops cleanly on SIGTERM (exit {rc})")
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
        check(False, f"{what} stops on SIGTERM")
    if FAILED and log:
        with open(log) as f:
            print(f.read()[-3000:])


def tear_down(daemon, work, log_path):
    """The end of a test that ran a daemon in a scratch directory: kills it if it still runs,
    prints the tail of its log when a check failed, removes the directory."""
    import os
    import shutil
    if daemon and daemon.poll() is None:
        daemon.kill()
        daemon.wait()
    if failed() and os.path.exists(log_path):
        print(open(log_path).read()[-3000:])
    shutil.rmtree(work, ignore_errors=True)
