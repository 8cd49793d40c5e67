"""The OpInfo cases run in a forked worker and never compile: they replace the
suite's autouse `fresh_compiler` fixture (a tmp_path and a compiler reset per
test) with a no-op, which is most of the per-test cost over ~2,700 cases."""

import pytest


@pytest.fixture(autouse=True)
def fresh_compiler():
    yield None
