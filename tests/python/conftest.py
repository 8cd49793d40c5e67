"""Every test gets a fresh, empty compile cache (TP_CACHE_DIR) and fresh compiler
state (metrics and in-process caches), so tests do not depend on each other or
on their order."""

import os

import pytest

import tensorplay as tp


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes tens of seconds (runs the benchmark harness)")


@pytest.fixture(autouse=True)
def fresh_compiler(tmp_path, monkeypatch):
    cache = tmp_path / "tp_cache"
    monkeypatch.setenv("TP_CACHE_DIR", str(cache))
    monkeypatch.delenv("TP_LOGS", raising=False)
    monkeypatch.delenv("TP_STAX_LOWER_DEBUG", raising=False)
    tp.compiler.reset()
    if hasattr(tp, "manual_seed"):
        tp.manual_seed(0)
    yield cache
    tp.compiler.reset()


@pytest.fixture
def cache_dir(fresh_compiler):
    """The (not yet existing) TP_CACHE_DIR of this test, as a pathlib.Path."""
    return fresh_compiler


@pytest.fixture
def subprocess_env():
    """Environment for child Python processes: this process's, including
    TP_CACHE_DIR, so a child sees the same cache directory."""
    return dict(os.environ)


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long randomized suites (e.g. 10^4 random Stax programs)")
