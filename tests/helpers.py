"""Shared test helpers: run the op on a batch, compare against the fp64 reference."""

import torch

from mixed_attn import MixedAttention
from mixed_attn.reference import reference_forward
from mixed_attn.testing import poison_like

# Relative L2 error each output dtype can reach, and a looser max-abs bound.
TOL = {torch.float32: (1e-5, 1e-4), torch.float16: (2e-3, 1e-2), torch.bfloat16: (1e-2, 6e-2)}


def run_op(batch, mode="split", deterministic=False, window_left=-1, logit_cap=0.0, sinks=None,
           k_scale=1.0, v_scale=1.0, save=True, sm_scale=None, wrapper=None, **wrapper_kw):
    """Plans and runs one step on copies of the batch's caches; outputs poisoned first."""
    q, kc, vc = batch.q, batch.k_cache.clone(), batch.v_cache.clone()
    if wrapper is None:
        wrapper = MixedAttention(
            q.shape[1], kc.shape[2], q.shape[2], batch.page_size, device=q.device, q_dtype=q.dtype,
            kv_dtype=kc.dtype, max_batch=batch.num_rows, max_tokens=q.shape[0],
            window_left=window_left, logit_cap=logit_cap, sm_scale=sm_scale,
            deterministic=deterministic, mode=mode, **wrapper_kw)
    wrapper.plan(batch.qo_indptr, batch.kv_indptr, batch.seq_lens)
    out = poison_like(q)
    lse = torch.full((q.shape[0], q.shape[1]), float("nan"), device=q.device)
    wrapper.run(q, kc, vc, batch.kv_indices, k=batch.k if save else None,
                v=batch.v if save else None, out=out, lse=lse, sinks=sinks, k_scale=k_scale,
                v_scale=v_scale)
    return out, lse, kc, vc, wrapper


def copy_row(src, dst, row):
    """Copies row 0 of batch `src` (its queries, new keys and values, cache pages) into row `row`
    of batch `dst` (same lengths and shapes); returns the row's token range in dst."""
    t0, t1 = int(dst.qo_indptr[row]), int(dst.qo_indptr[row + 1])
    dst.q[t0:t1] = src.q
    dst.k[t0:t1], dst.v[t0:t1] = src.k, src.v
    pa = src.kv_indices[: int(src.kv_indptr[1])].long()
    pb = dst.kv_indices[int(dst.kv_indptr[row]):int(dst.kv_indptr[row + 1])].long()
    dst.k_cache[pb] = src.k_cache[pa]
    dst.v_cache[pb] = src.v_cache[pa]
    return t0, t1


def run_reference(batch, window_left=-1, logit_cap=0.0, sinks=None, k_scale=1.0, v_scale=1.0,
                  save=True, sm_scale=None):
    cpu = lambda t: t.cpu() if t is not None else None  # noqa: E731
    return reference_forward(
        cpu(batch.q), cpu(batch.k) if save else None, cpu(batch.v) if save else None,
        cpu(batch.k_cache), cpu(batch.v_cache), batch.qo_indptr, batch.seq_lens, batch.kv_indptr,
        cpu(batch.kv_indices), batch.page_size, sm_scale=sm_scale, logit_cap=logit_cap,
        window_left=window_left, sinks=cpu(sinks), k_scale=k_scale, v_scale=v_scale)


def assert_close_to_reference(out, lse, ref_out, ref_lse, dtype, loose=1.0):
    rel_tol, abs_tol = TOL[dtype]
    out = out.double().cpu()
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    assert not torch.isnan(lse).any(), "unwritten (NaN-poisoned) lse elements"
    rel = (out - ref_out).norm() / ref_out.norm()
    assert rel <= rel_tol * loose, f"relative error {rel:.3g} > {rel_tol * loose:.3g}"
    err = (out - ref_out).abs().max()
    assert err <= abs_tol * loose, f"max abs error {err:.3g} > {abs_tol * loose:.3g}"
    lse_err = (lse.double().cpu() - ref_lse).abs().max()
    assert lse_err <= 1e-3 * loose, f"lse max abs error {lse_err:.3g}"
