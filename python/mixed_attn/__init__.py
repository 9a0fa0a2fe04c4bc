"""mixed_attn: attention for mixed prefill+decode batches in LLM serving.

A MIXED step (chunked-prefill extend rows plus running decode rows) is served as two sub-calls on
native kernels: extend rows through the extend kernel, decode rows through the split-KV decode
kernel, with a host-side planner and a persistent mid-buffer arena. See README.md.
"""

from . import _ops  # noqa: F401  (loads _C.so: registers torch.ops.mixed_attn)
from ._ops import has_cuda_kernels
from .buildinfo import build_info, check_device, info
from .buildinfo import version as _version
from .wrapper import MixedAttention, mixed_attention, split_dispatch_enabled

__all__ = ["MixedAttention", "mixed_attention", "split_dispatch_enabled", "has_cuda_kernels",
           "info", "build_info", "check_device"]
# The installed wheel's version with its local tag (0.1.0+cu130torch2.11); 0.1.0+src when run
# from the source tree.
__version__ = _version()

# A visible NVIDIA GPU this build has no kernels for gets a warning now (naming the archs the
# build holds and how to build for it) and an error when a wrapper is built on it.
from .buildinfo import warn_unsupported_gpus as _warn_unsupported_gpus  # noqa: E402

_warn_unsupported_gpus()
