"""Every environment variable mixed_attn reads, read here and only here, once, at import.

They are defaults of the wrapper's arguments (an argument given explicitly wins); kernels and
launchers never read the environment. The README has the same table.

| variable | values | default | what it sets |
|---|---|---|---|
| MIXED_ATTN_MODE | split / fold / auto | split | default of mode= |
| MIXED_ATTN_SPLIT_DISPATCH | 0 / 1 | 1 | 0 forces mode="fold" (every row through the extend kernel) |
| MIXED_ATTN_EXTEND_KERNEL | auto / mma / sm90 | auto | default of extend_backend= |
| MIXED_ATTN_DECODE_KERNEL | auto / tensor_core / tensor_core_narrow / portable | auto | default of decode_backend= |
| MIXED_ATTN_EXTEND_KV_SPLITS | 0..2 | 0 (policy) | default of extend_kv_splits= |
| MIXED_ATTN_EXTEND_TMA | auto / 0 / 1 | auto | default of extend_tma= |
| MIXED_ATTN_EXTEND_PERSISTENT | auto / 0 / 1 | auto | default of extend_persistent= |
| MIXED_ATTN_EXTEND_ITEM_PARTS | auto / 1..4 | auto | default of extend_item_parts= (1: never cut) |
| MIXED_ATTN_PDL | auto / 0 / 1 | auto | default of pdl= |
| MIXED_ATTN_TRANSFORMERS_ANY_VERSION | 0 / 1 | 0 | 1 lets the transformers adapter run on an unsupported version |
"""

import os

_FALSE = ("0", "false", "off", "no")

EXTEND_KERNELS = {"auto": 0, "mma": 1, "sm90": 2, "cpu": 3}
DECODE_KERNELS = {"auto": 0, "tensor_core": 1, "portable": 2, "cpu": 3, "tensor_core_narrow": 4}


def _read(name, default, allowed=None):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if allowed is not None and value not in allowed:
        raise ValueError(f"mixed_attn: {name}={raw!r} is not one of {sorted(allowed)}")
    return value


def _auto_or_flag(name):
    """An auto / 0 / 1 variable as the wrapper's -1 (policy) / 0 / 1."""
    value = _read(name, "auto", {"auto", "0", "1"})
    return -1 if value == "auto" else int(value)


MODE = _read("MIXED_ATTN_MODE", "split", {"split", "fold", "auto"})
SPLIT_DISPATCH = _read("MIXED_ATTN_SPLIT_DISPATCH", "1") not in _FALSE
EXTEND_KERNEL = _read("MIXED_ATTN_EXTEND_KERNEL", "auto", EXTEND_KERNELS)
DECODE_KERNEL = _read("MIXED_ATTN_DECODE_KERNEL", "auto", DECODE_KERNELS)
EXTEND_KV_SPLITS = int(_read("MIXED_ATTN_EXTEND_KV_SPLITS", "0", {"0", "1", "2"}))
EXTEND_TMA = _auto_or_flag("MIXED_ATTN_EXTEND_TMA")
EXTEND_PERSISTENT = _auto_or_flag("MIXED_ATTN_EXTEND_PERSISTENT")
_parts = _read("MIXED_ATTN_EXTEND_ITEM_PARTS", "auto", {"auto", "1", "2", "3", "4"})
EXTEND_ITEM_PARTS = -1 if _parts == "auto" else int(_parts)
PDL = _auto_or_flag("MIXED_ATTN_PDL")

TRANSFORMERS_ANY_VERSION = _read("MIXED_ATTN_TRANSFORMERS_ANY_VERSION", "0", {"0", "1"}) == "1"

# Names a README table and tests can check against.
VARIABLES = ("MIXED_ATTN_MODE", "MIXED_ATTN_SPLIT_DISPATCH", "MIXED_ATTN_EXTEND_KERNEL", "MIXED_ATTN_DECODE_KERNEL",
             "MIXED_ATTN_EXTEND_KV_SPLITS", "MIXED_ATTN_EXTEND_TMA", "MIXED_ATTN_EXTEND_PERSISTENT",
             "MIXED_ATTN_EXTEND_ITEM_PARTS", "MIXED_ATTN_PDL", "MIXED_ATTN_TRANSFORMERS_ANY_VERSION")
