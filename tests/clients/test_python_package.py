#!/usr/bin/env python3
"""ctest clients_python_package: `pip install clients/python` as a user runs it, then both
clients of the installed package against a real daemon.

The install is offline, as on a fresh Debian machine with python3-msgpack: a venv that sees the
system's site packages (msgpack, setuptools, wheel), pip with --no-index and
--no-build-isolation. The package then imports from the venv, not from the source tree, and
package_checks.py (run by the venv's python) drives the blocking Client and the asyncio
AsyncClient through decide, settle, charge, acquire and release, reservations, leases, the
header vector table and the typed errors.

usage: test_python_package.py TOKENTRIAGE SOURCE_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from ttcheck import check, connectable, stop, summary, tear_down, wait_for  # noqa: E402
from test_python_client import CONFIG  # noqa: E402  (the same limits; key_one for leases)



def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)
    return p.returncode, p.stdout + p.stderr


def main():
    tt, src = sys.argv[1], os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="tt-pypkg-")
    venv = os.path.join(work, "venv")
    py = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    env["PIP_NO_INPUT"] = "1"
    daemon = None
    try:
        rc, out = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], env=env)
        if not check(rc == 0, f"a venv is made (Debian: python3-venv) {out[-500:]}"):
            return summary("python package")
        # pip builds in the tree it is given: a copy, so the source tree stays clean
        tree = os.path.join(work, "python")
        shutil.copytree(os.path.join(src, "clients", "python"), tree,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        rc, out = run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", tree],
                      env=env, cwd=work)
        if not check(rc == 0, f"pip install clients/python works offline:\n{out[-3000:]}"):
            return summary("python package")
        rc, out = run([py, "-c", "import tokentriage, tokentriage_client, msgpack; "
                       "print(tokentriage.__file__); print(tokentriage.__version__)"],
                      env=env, cwd=work)
        lines = out.split()
        check(rc == 0 and lines and lines[0].startswith(venv),
              f"the package imports from the venv, not the source tree ({out.strip()})")
        rc, ver = run([tt, "version"])
        check(rc == 0 and len(lines) > 1 and f"tokentriage {lines[1]} " in ver,
              f"the package's version is the daemon's ({lines[1:2]} vs {ver.strip()})")

        sock = os.path.join(work, "tt.sock")
        cfg = os.path.join(work, "tt.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(sock=sock))
        log = open(os.path.join(work, "serve.log"), "w")
        daemon = subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL, stderr=log)
        wait_for("the daemon's socket", lambda: connectable(sock), procs=[daemon])
        checks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "package_checks.py")
        p = subprocess.run([py, checks, sock, os.path.join(src, "tests", "vectors", "headers.txt")],
                           env=env, cwd=work, text=True, capture_output=True, timeout=120)
        print(p.stdout + p.stderr, end="", flush=True)
        check(p.returncode == 0, f"the installed clients pass package_checks.py (exit {p.returncode})")
        stop(daemon, os.path.join(work, "serve.log"))
        daemon = None
        rc, out = run([py, "-c", "import tokentriage, sys\n"
                       "try:\n"
                       f"    tokentriage.Client({sock!r}, timeout=1.0).ping()\n"
                       "except tokentriage.Unavailable as e:\n"
                       "    print('unavailable', isinstance(e, OSError), e.code)\n"],
                      env=env, cwd=work)
        check(rc == 0 and out.strip() == "unavailable True unavailable",
              f"with the daemon gone: Unavailable, an OSError (the caller fails open or closed) ({out.strip()})")
    except Exception as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        tear_down(daemon, work, os.path.join(work, "serve.log"))
    return summary("python package")


if __name__ == "__main__":
    sys.exit(main())
