"""mixed_attn as the attention of transformers' continuous batching (CPU, fp32, random weights).

Tiny models built from configs (no download, no hub): generate_batch through paged|mixed_attn
gives the same greedy tokens as transformers' own paged|eager and as the non-paged eager model,
over prompts of different lengths with a small token budget per step, so prefills are chunked and
steps mix extend chunks with decodes. transformers is pinned in scripts/setup_env.sh.
"""

import pytest
import torch

try:
    import transformers
except ImportError:  # scripts/setup_env.sh installs it; say so instead of skipping quietly
    pytest.skip("transformers is not installed: scripts/setup_env.sh installs the pinned "
                "transformers==5.17.0 (and psutil, which its CPU memory sizing needs)",
                allow_module_level=True)

import mixed_attn.integrations.transformers as ma_tf  # noqa: E402

if ma_tf._version_tuple(transformers.__version__) not in ma_tf.SUPPORTED_VERSIONS:
    pytest.skip(f"transformers {transformers.__version__} is installed; these tests pin 5.17.0 "
                f"(scripts/setup_env.sh), the version the adapter supports",
                allow_module_level=True)

from transformers import (ContinuousBatchingConfig, GenerationConfig, GptOssConfig,  # noqa: E402
                          GptOssForCausalLM, LlamaConfig, LlamaForCausalLM)

VOCAB = 256
NEW_TOKENS = 10
# 12 prompts of different lengths; the last two share a 40-token prefix (block sharing).
PROMPT_LENS = [3, 17, 40, 9, 70, 5, 33, 12, 1, 26]


def _prompts():
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in PROMPT_LENS]
    shared = torch.randint(0, VOCAB, (40,), generator=g).tolist()
    prompts += [shared + [7, 8, 9], shared + [11] * 6]
    return prompts


def _cb_config():
    # A 48-token budget per step with 16-token blocks: long prompts are prefilled in chunks over
    # several steps while earlier requests decode, so most steps are mixed.
    return ContinuousBatchingConfig(block_size=16, num_blocks=96, max_batch_tokens=48,
                                    use_cuda_graph=False)


def _gen_config():
    return GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=-1,
                            pad_token_id=0)


def _generate_batch(model, impl, prompts):
    model.set_attn_implementation(impl)
    out = model.generate_batch(inputs=prompts, generation_config=_gen_config(),
                               continuous_batching_config=_cb_config())
    res = []
    for i in range(len(prompts)):
        o = out[f"req_{i}"]
        assert o.error is None, f"{impl}: request {i} failed: {o.error}"
        res.append(list(o.generated_tokens))
    return res


def _generate_plain(model, prompts):
    model.set_attn_implementation("eager")
    res = []
    for p in prompts:
        ids = torch.tensor([p])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=_gen_config())
        res.append(out[0, len(p):].tolist())
    return res


def _llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=64, max_position_embeddings=512, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


def _gpt_oss(layer_types=("full_attention", "full_attention")):
    torch.manual_seed(0)
    cfg = GptOssConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=128,
                       num_hidden_layers=len(layer_types), num_attention_heads=4, num_key_value_heads=2,
                       head_dim=64, max_position_embeddings=512, num_local_experts=4,
                       num_experts_per_tok=2, sliding_window=8, layer_types=list(layer_types))
    model = GptOssForCausalLM(cfg).eval()
    with torch.no_grad():  # sinks large enough to move the softmax (they init near 0)
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_(0.0, 2.0)
    return model


def _check_identity(model, mode):
    prompts = _prompts()
    ref_paged = _generate_batch(model, "paged|eager", prompts)
    ma_tf.reset_stats()
    name = ma_tf.register(mode=mode)
    got = _generate_batch(model, name, prompts)
    stats = dict(ma_tf.stats)
    plain = _generate_plain(model, prompts)
    for i, p in enumerate(prompts):
        assert got[i] == ref_paged[i], f"prompt {i} (len {len(p)}): mixed_attn vs paged|eager"
        assert got[i] == plain[i], f"prompt {i} (len {len(p)}): mixed_attn vs non-paged eager"
    layers = model.config.num_hidden_layers
    # One plan and one host sync per step, every layer of every step through mixed_attn.
    assert stats["steps"] > 0 and stats["host_syncs"] == stats["steps"]
    assert stats["layer_calls"] == stats["steps"] * layers
    assert stats["mixed_steps"] >= 3, stats  # the test really mixes extend chunks and decodes
    assert stats["decode_rows"] > 0 and stats["extend_rows"] > 0


@pytest.mark.parametrize("mode", ["split", "fold", "auto"])
def test_llama_gqa_tokens_identical(mode):
    _check_identity(_llama(), mode)


@pytest.mark.parametrize("layer_types", [
    ("full_attention", "full_attention"),
    ("sliding_attention", "full_attention"),                    # gpt-oss's alternation
    ("sliding_attention", "full_attention", "full_attention"),  # two full groups, own blocks
    ("sliding_attention", "sliding_attention"),                 # sliding only
], ids=["full", "sliding+full", "sliding+2full", "sliding"])
def test_gpt_oss_sinks_tokens_identical(layer_types):
    # sliding_window 8 against prompts up to 70 tokens and 48-token steps: the rolling buffer
    # wraps inside prefill chunks and during decode.
    _check_identity(_gpt_oss(layer_types), "split")


def test_sinks_matter():
    """The sinks of the gpt-oss fixture change the tokens, so the identity above checks them."""
    model = _gpt_oss()
    prompts = _prompts()[:4]
    name = ma_tf.register()
    with_sinks = _generate_batch(model, name, prompts)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.zero_()
    assert _generate_batch(model, name, prompts) != with_sinks


def test_check_config():
    ma_tf.check_config(_gpt_oss(("sliding_attention", "full_attention")).config)
    assert ma_tf.register(config=_llama().config) == ma_tf.ATTN_IMPLEMENTATION
    bad = LlamaConfig(hidden_size=96 * 4, num_attention_heads=4, num_key_value_heads=2, head_dim=96)
    with pytest.raises(ValueError, match="head dims 64, 128 and 256"):
        ma_tf.register(config=bad)


def test_from_pretrained_name(tmp_path):
    """from_pretrained(..., attn_implementation="paged|mixed_attn") from a local save (no hub)."""
    name = ma_tf.register()
    _llama().save_pretrained(tmp_path)
    model = LlamaForCausalLM.from_pretrained(tmp_path, attn_implementation=name).eval()
    assert model.config._attn_implementation == name
    prompts = _prompts()[:4]
    ma_tf.reset_stats()
    got = _generate_batch(model, name, prompts)
    assert ma_tf.stats["layer_calls"] > 0
    assert got == _generate_batch(model, "paged|eager", prompts)


def test_plain_forward_refused():
    model = _llama()
    model.set_attn_implementation(ma_tf.register())
    with pytest.raises(ValueError, match="without a paged cache"):
        model(torch.tensor([[1, 2, 3]]))


def test_version_and_name_checks():
    assert ma_tf.check_version("5.17.0") == "5.17.0"
    assert ma_tf.check_version("5.17.2.dev0") == "5.17.2.dev0"
    for bad in ["5.16.0", "5.18.0", "4.57.1", "6.0.0"]:
        with pytest.raises(RuntimeError, match="supports transformers 5.17.x"):
            ma_tf.check_version(bad)
    with pytest.raises(ValueError, match="'flash'"):
        ma_tf.register("paged|flash_mixed")
    with pytest.raises(ValueError, match="paged\\|"):
        ma_tf.register("mixed_attn")
    with pytest.raises(ValueError, match="mode"):
        ma_tf.register(mode="fast")


class _FakeCache:
    """The parts of transformers' PagedAttentionCache the adapter reads, one full-attention group."""

    def __init__(self, num_blocks, block_size, hkv, d, layers):
        self.block_size, self.num_blocks = block_size, num_blocks
        self.max_batch_tokens = 64
        self.num_sliding_attention_groups = 0
        self.sliding_windows = {i: 1 for i in range(layers)}
        self.layer_index_to_group_indices = {i: (0, i) for i in range(layers)}
        shape = ((num_blocks + 2) * block_size, hkv, d)
        self.key_cache = [torch.randn(shape) for _ in range(layers)]
        self.value_cache = [torch.randn(shape) for _ in range(layers)]


def test_padding_rows_and_plan_reuse():
    """Zero-length padding rows (static-shape padding) are dropped, their output rows zeroed; the
    layers of a step share one plan; a second step with the same metadata objects replans."""
    torch.manual_seed(3)
    bs, hq, hkv, d, layers = 4, 4, 2, 64, 2
    cache = _FakeCache(num_blocks=12, block_size=bs, hkv=hkv, d=d, layers=layers)
    past, new = [5, 0, 9], [1, 6, 2]  # a decode row, a fresh prefill, an extend chunk
    tables = [[3, 7], [1, 10], [4, 0, 8]]  # scattered blocks
    read, write, cu_q, cu_k = [], [], [0], [0]
    for p, n, t in zip(past, new, tables):
        slot = lambda j, t=t: t[j // bs] * bs + j % bs  # noqa: E731
        read += [slot(j) for j in range(p + n)]
        write += [slot(j) for j in range(p, p + n)]
        cu_q.append(cu_q[-1] + n)
        cu_k.append(cu_k[-1] + p + n)
    T, pad = cu_q[-1], 3
    cu_q += [T, T]  # two padding rows
    cu_k += [cu_k[-1]] * 2
    q = torch.randn(1, hq, T + pad, d)
    k = torch.randn(1, hkv, T + pad, d)
    v = torch.randn(1, hkv, T + pad, d)
    kw = dict(cache=cache, cu_seq_lens_q=torch.tensor(cu_q, dtype=torch.int32),
              cu_seq_lens_k=torch.tensor(cu_k, dtype=torch.int32),
              read_index=[torch.tensor(read)], write_index=[torch.tensor(write)])

    class Layer:
        def __init__(self, i):
            self.layer_idx, self.scaling = i, d ** -0.5

    ma_tf.register()
    ma_tf.reset_stats()
    outs = [ma_tf.paged_attention_forward(Layer(i), q, k, v, None, scaling=d ** -0.5, **kw)[0]
            for i in range(layers)]
    assert ma_tf.stats["steps"] == 1 and ma_tf.stats["layer_calls"] == layers
    for i, out in enumerate(outs):
        assert out.shape == (1, T + pad, hq, d)
        assert torch.all(out[0, T:] == 0)
        kc, vc = cache.key_cache[i], cache.value_cache[i]
        # the new tokens were saved to the slots write_index names
        assert torch.equal(kc[torch.tensor(write)], k[0].transpose(0, 1)[:T])
        assert torch.equal(vc[torch.tensor(write)], v[0].transpose(0, 1)[:T])
        for b in range(3):
            rows = slice(cu_q[b], cu_q[b + 1])
            keys = kc[torch.tensor(read[cu_k[b]:cu_k[b + 1]])].repeat_interleave(hq // hkv, 1)
            vals = vc[torch.tensor(read[cu_k[b]:cu_k[b + 1]])].repeat_interleave(hq // hkv, 1)
            qb = q[0].transpose(0, 1)[rows]
            s = torch.einsum("thd,khd->htk", qb.double(), keys.double()) * d ** -0.5
            pos = past[b] + torch.arange(new[b])
            s = s.masked_fill(torch.arange(past[b] + new[b])[None, :] > pos[:, None], float("-inf"))
            ref = torch.einsum("htk,khd->thd", s.softmax(-1), vals.double())
            torch.testing.assert_close(out[0, rows].double(), ref, atol=1e-5, rtol=1e-5)
    # The same metadata objects at layer 0 again: a new forward pass, planned again.
    ma_tf.paged_attention_forward(Layer(0), q, k, v, None, scaling=d ** -0.5, **kw)
    assert ma_tf.stats["steps"] == 2

