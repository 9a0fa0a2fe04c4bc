"""The host planner: partition, split counts, arena slices, extend tiles, metadata upload."""

import random

import pytest
import torch

from mixed_attn import MixedAttention
from mixed_attn.plan_info import MAGIC, field, make_config, unpack_meta
from mixed_attn.testing import batch_indptrs


def plan(ext, pre, page_size=16, Hq=32, Hkv=8, D=128, window_left=-1, mode=0, num_sms=132,
         deterministic=False, fixed=2048, max_splits=32, tile=64, meta_cap=100000, decode_max_q=0):
    qo, kv, seq = batch_indptrs(ext, pre, page_size)
    meta = torch.full((meta_cap,), -7, dtype=torch.int32)
    t = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    cfg = make_config("cpu", page_size, Hq, Hkv, D, num_sms=num_sms, window_left=window_left,
                      mode=mode, deterministic=deterministic, fixed_split_tokens=fixed,
                      max_splits_per_row=max_splits, extend_tile_tokens=tile, decode_max_q=decode_max_q)
    info = torch.ops.mixed_attn.plan(t(qo), t(kv), t(seq), meta, cfg)
    return info, unpack_meta(info, meta), seq


def random_batch(rng, n):
    def one():
        x = rng.random()
        return 1 if x < 0.6 else (rng.randint(2, 17) if x < 0.8 else rng.randint(2, 700))
    ext = [one() for _ in range(n)]
    pre = [rng.randint(0, 40000) for _ in range(n)]
    return ext, pre


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("decode_max_q", [0, 1, 7, 16])
def test_plan_invariants(seed, deterministic, decode_max_q):
    rng = random.Random(seed)
    ext, pre = random_batch(rng, rng.choice([1, 17, 128, 513]))
    window = rng.choice([-1, -1, 100, 4095])
    info, m, seq = plan(ext, pre, window_left=window, deterministic=deterministic, max_splits=16,
                        decode_max_q=decode_max_q)
    assert field(info, "magic") == MAGIC
    B = len(ext)
    # Partition: decode rows are exactly the rows of at most decode_max_q new tokens (the
    # policy's default: 32 (query, head) pairs, 32 // group = 8 at group 4), each once, in row order.
    dmq = field(info, "decode_max_q_policy")
    assert dmq == (decode_max_q or 8)
    decode = [b for b in range(B) if ext[b] <= dmq]
    assert m["decode_rows"].tolist() == decode
    assert field(info, "num_extend_rows") == B - len(decode)
    launch_q = field(info, "decode_max_q")
    assert launch_q == (dmq if deterministic else max([ext[b] for b in decode], default=1))
    # Splits: within bounds, and their key ranges cover the visible keys exactly once. A row of
    # q tokens holds q arena slots per split.
    sp = m["decode_split_indptr"].tolist()
    assert sp[0] == 0 and field(info, "num_partials") == sp[-1]
    for d, row in enumerate(decode):
        assert (sp[d + 1] - sp[d]) % ext[row] == 0
        n = (sp[d + 1] - sp[d]) // ext[row]
        assert n >= 1
        if not deterministic:
            assert n <= 16
        start, chunk = int(m["decode_kv_start"][d]), int(m["decode_chunk_tokens"][d])
        first_visible = max(0, seq[row] - ext[row] - window) if window >= 0 else 0
        assert start <= first_visible and start % 16 == 0
        assert start + (n - 1) * chunk < seq[row] <= start + n * chunk
        if deterministic:
            assert chunk == 2048
    # Arena slices of different rows are disjoint and inside [0, num_partials).
    slots = [s for d in range(len(decode)) for s in range(sp[d], sp[d + 1])]
    assert sorted(slots) == list(range(field(info, "num_partials")))
    # Extend tiles cover every query of every extend row exactly once.
    tiles = m["extend_tiles"].tolist()
    covered = {}
    for row, q0 in tiles:
        assert ext[row] > dmq
        for i in range(q0, min(q0 + 64, ext[row])):
            covered[(row, i)] = covered.get((row, i), 0) + 1
    expect = {(b, i): 1 for b in range(B) if ext[b] > dmq for i in range(ext[b])}
    assert covered == expect


def test_fold_puts_every_row_in_the_extend_list():
    info, m, _ = plan([1, 5, 1], [10, 20, 30], mode=1)
    assert field(info, "num_decode_rows") == 0 and field(info, "num_partials") == 0
    assert sorted({r for r, _ in m["extend_tiles"].tolist()}) == [0, 1, 2]


def test_sm_aware_policy_fills_the_gpu():
    # Few long decode rows: split until (rows * kv heads * splits) reaches ~2 CTAs per SM.
    info, m, _ = plan([1] * 4, [32767] * 4, Hkv=8, num_sms=132)
    ctas = field(info, "num_partials") * 8
    assert 132 <= ctas <= 4 * 132
    # Many rows already fill it: no split.
    info, _, _ = plan([1] * 512, [4095] * 512, Hkv=8)
    assert field(info, "max_splits") == 1


def test_deterministic_splits_depend_on_the_row_alone():
    a, ma, _ = plan([1], [5000], deterministic=True)
    b, mb, _ = plan([300, 1, 1, 1], [10, 5000, 20000, 3], deterministic=True)
    assert int(ma["decode_chunk_tokens"][0]) == int(mb["decode_chunk_tokens"][0])
    assert field(a, "num_partials") == int(mb["decode_split_indptr"][1] - mb["decode_split_indptr"][0])


def test_tiles_costliest_first():
    _, m, _ = plan([200, 64, 1000], [0, 5000, 0], tile=64)
    tiles = m["extend_tiles"].tolist()
    assert tiles[0] == [1, 0]  # 5000-key prefix: the most work
    cost = lambda t: [0, 5000, 0][t[0]] + t[1]  # noqa: E731
    assert all(cost(tiles[i]) >= cost(tiles[i + 1]) - 64 for i in range(len(tiles) - 1))


def test_rejected_plan_writes_nothing():
    meta = torch.full((1000,), -7, dtype=torch.int32)
    t = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    with pytest.raises(RuntimeError, match="extend_len"):
        torch.ops.mixed_attn.plan(t([0, 3, 3]), t([0, 1, 2]), t([3, 4]), meta,
                                  make_config("cpu", 16, 4, 1, 64))
    assert (meta == -7).all()


def test_metadata_capacity_error_is_clear():
    with pytest.raises(RuntimeError, match="metadata needs"):
        plan([1] * 50, [10] * 50, meta_cap=20)


def test_one_host_to_device_copy_per_plan():
    w = MixedAttention(4, 1, 64, 16, device="cpu", max_batch=8, max_tokens=64)
    for i in range(5):
        w.plan([0, 1, 3 + i], [0, 1, 2], [5, 10 + i])
    assert w.h2d_copies == 5


def test_plan_rejects_device_tensors_and_lists_work():
    w = MixedAttention(4, 1, 64, 16, device="cpu", max_batch=8, max_tokens=64, decode_max_q=2)
    info = w.plan([0, 1, 4], [0, 1, 2], [5, 10])
    assert field(info, "num_decode_rows") == 1
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="host"):
            w.plan(torch.tensor([0, 1, 4], device="cuda"), [0, 1, 2], [5, 10])


@pytest.mark.parametrize("group,decode_max_q", [(4, 16), (4, 5), (8, 8), (1, 16), (32, 2)])
@pytest.mark.parametrize("deterministic", [False, True])
def test_gpu_plans_of_verify_rows(group, decode_max_q, deterministic):
    # Plans for a CUDA device (made on the host: the planner needs no GPU). The tensor-core
    # decode serves up to 4 blocks of 16 (query, head) pairs per CTA; the graph bucket's bound on
    # arena slots holds for random steps.
    Hkv = 2
    Hq = group * Hkv
    cfg = make_config("cpu", 16, Hq, Hkv, 128, num_sms=132, device_kind=1, device_arch=90,
                      decode_max_q=decode_max_q, deterministic=deterministic, fixed_split_tokens=2048,
                      graph_safe=1, graph_max_rows=32, graph_max_tokens=512, graph_max_extend_tokens=512)
    bound = torch.ops.mixed_attn.launch_policy(cfg)[7]
    rng = random.Random(group * 100 + decode_max_q)
    for _ in range(100):
        B = rng.randint(1, 32)
        ext = [rng.randint(1, decode_max_q) for _ in range(B)]
        pre = [rng.choice([0, 7, 900, 5000, 30000]) for _ in range(B)]
        meta = torch.zeros(100000, dtype=torch.int32)
        info = torch.ops.mixed_attn.plan(*batch_indptrs(ext, pre, 16, tensors=True), meta, cfg)
        assert field(info, "num_decode_rows") == B and field(info, "num_partials") <= bound
        blocks = field(info, "decode_cta_blocks")
        need = -(-decode_max_q * group // 16)
        assert blocks == min(4, 1 if need <= 1 else (2 if need <= 2 else 4))


@pytest.mark.parametrize("decode_max_q", [-1, 17])
def test_decode_max_q_out_of_range_is_an_error_naming_it(decode_max_q):
    with pytest.raises(RuntimeError, match="decode_max_q must be in"):
        MixedAttention(8, 2, 64, 16, device="cpu", decode_max_q=decode_max_q)
    meta = torch.full((1000,), -7, dtype=torch.int32)
    t = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    with pytest.raises(RuntimeError, match="decode_max_q must be in"):
        torch.ops.mixed_attn.plan(t([0, 1]), t([0, 1]), t([5]), meta,
                                  make_config("cpu", 16, 8, 2, 64, decode_max_q=decode_max_q))
    assert (meta == -7).all()


def test_sm_aware_splits_are_equal_and_wave_aware():
    # 128 rows at 8k over one kv head, 132 SMs x 2 CTAs: the plain chunk (total keys / 264) gives
    # 3 splits a row = 384 CTAs, 1.45 waves; the wave rule takes 2 splits = 256 CTAs, one wave.
    info, m, seq = plan([1] * 128, [8192] * 128, Hq=8, Hkv=1, num_sms=132)
    assert field(info, "max_splits") == 2 and field(info, "num_partials") == 256
    # Equal splits: each split is rounded up to the 64-key alignment, so the last one is short by
    # less than n * 64 keys (without the rule it would hold whatever is left of the chunk).
    info, m, seq = plan([1] * 4, [30000] * 4, Hkv=8, num_sms=132)
    chunk, n = int(m["decode_chunk_tokens"][0]), int(m["decode_split_indptr"][1])
    assert n > 1 and seq[0] - (n - 1) * chunk > chunk - n * 64


def test_wave_aware_splits_cut_the_longest_row_to_fill_a_wave():
    # Measured on the H200 (benchmarks/RESULTS.md, session 11, tools/sweep_decode_splits.py).
    # 2 rows at 128k over 8 kv heads, 132 SMs x 2 CTAs: the fill chunk (total keys / 264) gives 17
    # splits, 272 CTAs, one past a wave, and its multiples 11 (176 CTAs: 0.323 ms); cutting the
    # longest row gives 16 splits, 256 CTAs in one wave (0.274 ms).
    info, m, seq = plan([1] * 2, [131071] * 2, Hkv=8, num_sms=132)
    assert field(info, "max_splits") == 16 and field(info, "num_partials") == 32
    # 8 rows at 128k: 4 splits, 256 CTAs (1.000 ms, against 1.120 for 3 splits, 192 CTAs).
    info, m, seq = plan([1] * 8, [131071] * 8, Hkv=8, num_sms=132)
    assert field(info, "max_splits") == 4 and field(info, "num_partials") == 32
    # Rows of 512-16k keys: the fill chunk is longer than every row, yet the longest rows are
    # split, so they do not make a last wave of their own (0.80 ms against 0.91 unsplit).
    rng = random.Random(5)
    lens = [rng.randint(512, 16384) for _ in range(96)]
    info, m, seq = plan([1] * 96, [x - 1 for x in lens], Hkv=8, num_sms=132)
    assert field(info, "max_splits") > 4
    # A batch that fills the GPU with rows of one length stays unsplit (128 rows at 4k: 1024 CTAs).
    info, m, seq = plan([1] * 128, [4095] * 128, Hkv=8, num_sms=132)
    assert field(info, "max_splits") == 1
    # Graph-safe plans never go below the fill chunk (the bucket's slot bound holds): the 96 rows
    # of 512-16k keys stay unsplit there.
    w = MixedAttention(32, 8, 128, 16, device="cpu", cuda_graph=True, max_batch=96, max_tokens=96, num_sms=132)
    qo, kv, seq = batch_indptrs([1] * 96, [x - 1 for x in lens], 16)
    t = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    info = w.plan(t(qo), t(kv), t(seq))
    assert field(info, "max_splits") == 1
