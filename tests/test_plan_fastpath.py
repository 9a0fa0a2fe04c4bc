"""MixedAttention.plan()'s fast call (mixed_attn._fastplan): the same plans, metadata, errors and
wrapper state as the regular torch.ops call, and the regular call wherever it does not apply."""

import logging
import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mixed_attn import MixedAttention, _ops
from mixed_attn.plan_info import INDEX
from mixed_attn.testing import batch_indptrs

pytestmark = pytest.mark.skipif(_ops.FASTPLAN is None, reason="this build has no mixed_attn._fastplan")

Hq, Hkv, D, PAGE = 8, 2, 64, 16
i32 = torch.int32


def step(ext, pre, page=PAGE):
    return batch_indptrs(ext, pre, page, tensors=True)


def pair(**kw):
    """Two identical wrappers: one with the fast call, one making the regular op call."""
    kw = dict(dict(device="cpu", max_batch=64, max_tokens=4096), **kw)
    fast, slow = MixedAttention(Hq, Hkv, D, PAGE, **kw), MixedAttention(Hq, Hkv, D, PAGE, **kw)
    assert fast._fast_plan is not None
    slow._fast_plan = None
    return fast, slow


def state(w):
    """What a plan leaves: plan_info, the metadata it wrote (device buffer and the host buffer of
    its turn, up to meta_len: the buffers are uninitialised past it), the buffer turn, the
    counters and the sizes."""
    info = list(w.plan_info) if w.plan_info is not None else None
    n = info[INDEX["meta_len"]] if info else 0
    written = w._meta_host[w._meta_turn ^ 1]
    return (info, w.plan_meta[:n].tolist(), written[:n].tolist(), w._meta_turn, w.h2d_copies,
            w.arena_slots, w.arena_grows, w.max_batch, w.max_tokens)


def assert_same_state(a, b):
    assert state(a) == state(b)


def poison(*wrappers):
    """The same contents in every metadata buffer (a graph bucket's layout has gaps no plan writes)."""
    for w in wrappers:
        for m in w._meta_host + [w.plan_meta]:
            m.fill_(-7)


def fast_calls(w):
    """Counts the steps the fast call served (None: it declined)."""
    served = []
    inner = w._fast_plan

    def counting(*args):
        info = inner(*args)
        served.append(info is not None)
        return info
    w._fast_plan = counting
    return served


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kw", [{}, dict(deterministic=True), dict(mode="fold"), dict(window_left=300),
                                dict(cuda_graph=True, max_batch=64, max_tokens=4096)])
def test_same_plans_as_the_op_call(seed, kw):
    rng = random.Random(seed)
    fast, slow = pair(**kw)
    served = fast_calls(fast)
    for _ in range(6):
        n = rng.choice([1, 3, 16, 64])
        ext = [1 if rng.random() < 0.7 else rng.randint(2, 40) for _ in range(n)]
        pre = [rng.randint(0, 5000) for _ in range(n)]
        qo, kv, sl = step(ext, pre)
        poison(fast, slow)
        info = fast.plan(qo, kv, sl)
        assert type(info) is list and info == slow.plan(qo, kv, sl)
        assert_same_state(fast, slow)
    assert all(served)


def test_declines_what_the_regular_path_converts_or_grows():
    fast, slow = pair(max_batch=4, max_tokens=64)
    served = fast_calls(fast)
    qo, kv, sl = step([1, 1, 5], [10, 300, 7])
    cases = [
        ([int(x) for x in qo], [int(x) for x in kv], [int(x) for x in sl]),  # lists
        (qo.long(), kv, sl),  # int64
        (torch.stack([qo, qo], 1)[:, 0], kv, sl),  # not contiguous
        (qo, kv, sl),  # the plain case
    ]
    for args in cases:
        assert fast.plan(*args) == slow.plan(*args)
        assert_same_state(fast, slow)
    assert served == [False, False, False, True]
    # More rows than max_batch: the regular path grows the buffers first (and logs it).
    qo, kv, sl = step([1] * 9, [50] * 9)
    assert fast.plan(qo, kv, sl) == slow.plan(qo, kv, sl)
    assert_same_state(fast, slow)
    assert fast.max_batch == slow.max_batch == 9 and served[-1] is False
    assert fast.plan(qo, kv, sl) == slow.plan(qo, kv, sl) and served[-1] is True
    # More tokens than max_tokens: the fast call declines (the planner's error), the regular path grows.
    qo, kv, sl = step([2000, 1], [0, 30])
    assert fast.plan(qo, kv, sl) == slow.plan(qo, kv, sl)
    assert fast.max_tokens == slow.max_tokens == 2001 and served[-1] is False


def test_arena_grows_the_same(caplog):
    fast, slow = pair(max_batch=1, max_splits_per_row=1)  # an arena of one slot
    qo, kv, sl = step([1, 1, 1], [30000, 30000, 30000])
    with caplog.at_level(logging.WARNING, logger="mixed_attn"):
        assert fast.plan(qo, kv, sl) == slow.plan(qo, kv, sl)
    assert fast.arena_grows == slow.arena_grows == 1 and fast.arena_slots == slow.arena_slots
    assert sum("arena slots" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize("qo,kv,seq", [
    ([0, 3, 3], [0, 1, 2], [3, 4]),
    ([1, 3, 5], [0, 1, 2], [3, 4]),
    ([0, 3, 5], [0, 1], [3, 4]),
    ([0, 3, 5], [0, 1, 2], [3]),
    ([0, 3, 5], [0, 1, 2], [3, 1]),
    ([0, 3, 5], [0, 1, 2], [3, 40]),
    ([0, 3, 5], [0, 2, 1], [3, 4]),
    ([0], [0], []),
])
@pytest.mark.parametrize("graph", [False, True])
def test_same_errors_and_nothing_written(qo, kv, seq, graph):
    kw = dict(cuda_graph=True, max_batch=8, max_tokens=64) if graph else {}
    fast, slow = pair(**kw)
    good = step([1, 2], [3, 4])
    fast.plan(*good), slow.plan(*good)
    before = state(fast)
    t = [torch.tensor(x, dtype=i32) for x in (qo, kv, seq)]
    with pytest.raises(RuntimeError) as e_slow:
        slow.plan(*t)
    with pytest.raises(RuntimeError) as e_fast:
        fast.plan(*t)
    assert type(e_fast.value) is type(e_slow.value) and str(e_fast.value) == str(e_slow.value)
    assert state(fast) == before


def test_graph_bucket_limits_same_errors():
    fast, slow = pair(cuda_graph=True, max_batch=4, max_tokens=64, max_extend_tokens=0)
    # over max_batch; an extend-kernel row (longer than any decode_max_q) in a decode-only bucket
    for ext, pre in [([1] * 5, [10] * 5), ([40, 1], [5, 5])]:
        t = step(ext, pre)
        with pytest.raises(RuntimeError) as e_slow:
            slow.plan(*t)
        with pytest.raises(RuntimeError) as e_fast:
            fast.plan(*t)
        assert str(e_fast.value) == str(e_slow.value) and "graph bucket" in str(e_fast.value)


def test_device_tensor_is_the_same_value_error():
    fast, _ = pair()
    qo = torch.tensor([0, 1], dtype=i32, device="meta")
    with pytest.raises(ValueError, match="must be a host tensor or a list"):
        fast.plan(qo, torch.tensor([0, 1], dtype=i32), torch.tensor([5], dtype=i32))


def test_modes_still_see_the_op():
    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    fast, slow = pair()
    t = step([1, 4], [100, 7])
    with Log() as log:
        info = fast.plan(*t)
    assert info == slow.plan(*t)
    assert any("plan_upload" in op for op in log.ops)
    with torch.inference_mode():
        assert fast.plan(*t) == info
