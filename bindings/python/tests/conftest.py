"""Fixtures: the library under test ($LIBINFER_LIBRARY) and random-weight models written by the
infer-make-model tool ($INFER_MAKE_MODEL). Both are required: a missing one is an error, never a
skip. With LIBINFER_TESTS_STRICT=1 (CTest sets it) a skipped test counts as a failure."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import libinfer  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("LIBINFER_TESTS_STRICT") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, which LIBINFER_TESTS_STRICT=1 counts as a failure: {reason}"


@pytest.fixture(scope="session")
def library():
    try:
        return libinfer.load_library()
    except libinfer.LibraryNotFound as e:
        pytest.fail(f"set LIBINFER_LIBRARY to the built libinfer.so: {e}", pytrace=False)


def _make_model(tmp_path_factory, name, ctx):
    tool = os.environ.get("INFER_MAKE_MODEL")
    if not tool or not os.access(tool, os.X_OK):
        pytest.fail(f"set INFER_MAKE_MODEL to the infer-make-model tool (got {tool!r})", pytrace=False)
    path = str(tmp_path_factory.mktemp("models") / name)
    subprocess.run(
        [tool, "-o", path, "--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2",
         "--n-ff", "128", "--ctx", str(ctx), "--seed", "1"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return path


@pytest.fixture(scope="session")
def model_path(library, tmp_path_factory):
    """A 2-layer Llama with the byte vocabulary (259 ids: <unk>, <s>, </s>, 256 bytes), ctx 256."""
    return _make_model(tmp_path_factory, "small.gguf", 256)


@pytest.fixture(scope="session")
def long_model_path(library, tmp_path_factory):
    """The same shapes with a 2048-position context, for requests that must outlast a cancel."""
    return _make_model(tmp_path_factory, "long.gguf", 2048)


@pytest.fixture(scope="session")
def engine(model_path):
    """One engine shared by the tests that do not look at engine-wide counts."""
    with libinfer.Engine(model_path, threads=2) as e:
        yield e


@pytest.fixture
def fresh_engine(long_model_path):
    """A new engine per test, for tests that read its counters."""
    with libinfer.Engine(long_model_path, threads=2) as e:
        yield e
