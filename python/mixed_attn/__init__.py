"""mixed_attn: attention for mixed prefill+decode batches in LLM serving.

A MIXED step (chunked-prefill extend rows plus running decode rows) is served as two sub-calls on
native kernels: extend rows through the extend kernel, decode rows through the split-KV decode
kernel, with a host-side planner and a persistent mid-buffer arena. See README.md.
"""

from . import _ops
from ._ops import has_cuda_kernels
from .wrapper import MixedAttention, mixed_attention, split_dispatch_enabled

__all__ = ["MixedAttention", "mixed_attention", "split_dispatch_enabled", "has_cuda_kernels"]
__version__ = "0.1.0"
