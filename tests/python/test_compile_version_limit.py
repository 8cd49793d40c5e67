"""A compiled function stops capturing new versions after options['max_versions']
(default 16): further misses run eagerly with one warning, instead of a capture
and a compile on every call (a module's call counter, an int argument that
changes every step and is kept by value). Results stay eager's throughout."""
import warnings

import pytest

import tensorplay as tp


def _calls(fn, args_list):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = [fn(*a) for a in args_list]
    return out, [str(m.message) for m in w if "running eagerly" in str(m.message)]


def test_module_counter_changing_every_call_stops_recompiling():
    class Counting(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.lin = tp.nn.Linear(4, 4)

        def forward(self, x):
            self.calls += 1
            return self.lin(x) * self.calls

    m = Counting()
    cm = tp.compile(m)
    x = tp.randn(3, 4)
    tp.compiler.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(24):
            y = cm(x)
            tp.testing.assert_close(y, m.lin(x) * m.calls)
    assert m.calls == 24
    assert tp.compiler.metrics.recompiles == 15            # 16 versions, then eager
    assert tp.compiler.metrics.fallback_count == 8
    msgs = [str(a.message) for a in w if "16 compiled versions" in str(a.message)]
    assert len(msgs) == 1 and "max_versions" in msgs[0]


def test_option_sets_the_limit_and_existing_versions_still_run():
    # (dynamic_ints off: n by value, a version per value; by default n would be symbolic after it changed)
    f = tp.compile(lambda x, n: x * n + n, options={"max_versions": 2, "dynamic_ints": False})
    x = tp.randn(5)
    tp.compiler.reset()
    outs, warned = _calls(f, [(x, n) for n in (1, 2, 3, 4)])
    for n, y in zip((1, 2, 3, 4), outs):
        tp.testing.assert_close(y, x * n + n)
    assert tp.compiler.metrics.recompiles == 1 and tp.compiler.metrics.fallback_count == 2
    assert len(warned) == 1
    tp.testing.assert_close(f(x, 2), x * 2 + 2)             # a cached version still runs compiled
    assert tp.compiler.metrics.fallback_count == 2


def test_zero_means_no_limit_and_bad_values_raise():
    f = tp.compile(lambda x, n: x + n, options={"max_versions": 0, "dynamic_ints": False})
    x = tp.randn(2)
    tp.compiler.reset()
    _, warned = _calls(f, [(x, n) for n in range(20)])
    assert not warned and tp.compiler.metrics.recompiles == 19
    with pytest.raises(ValueError, match="max_versions"):
        tp.compile(lambda x, n: x + n, options={"max_versions": "many"})(x, 1)
