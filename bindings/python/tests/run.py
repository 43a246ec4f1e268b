#!/usr/bin/env python3
"""CTest's entry point: `python3 -m pytest -q` over this directory with an interpreter that has
pytest (this one, else Debian's /usr/bin/python3, where scripts/setup-deps installs
python3-pytest). Fails loudly when none has pytest, when no test ran (pytest's exit 5), and, with
LIBINFER_TESTS_STRICT=1 set here, on any skipped test."""

import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
candidates = [sys.executable, "/usr/bin/python3", shutil.which("python3")]
tried = []
for python in dict.fromkeys(c for c in candidates if c and os.path.exists(c)):
    tried.append(python)
    if subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode != 0:
        continue
    env = dict(os.environ, LIBINFER_TESTS_STRICT="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", here] + sys.argv[1:]
    print(" ".join(cmd), flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    if rc == 5:
        print("python binding tests: pytest collected no test (exit 5): a failure here", file=sys.stderr)
        sys.exit(1)
    sys.exit(rc)
print(
    "python binding tests: pytest is not installed for " + ", ".join(tried)
    + "; run scripts/setup-deps (it installs python3-pytest)",
    file=sys.stderr,
)
sys.exit(1)
