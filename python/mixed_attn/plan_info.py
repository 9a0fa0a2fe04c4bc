"""Python view of ``plan_info`` and of the planner's config list.

The field lists are defined once, in C++ (``PlanInfoField`` / ``PlanConfigField`` in
csrc/include/mixed_attn/plan.h), and read from the extension here.
"""

import torch

from . import _ops  # noqa: F401  (registers torch.ops.mixed_attn)

FIELDS = tuple(torch.ops.mixed_attn.plan_field_names("info"))
CONFIG_FIELDS = tuple(torch.ops.mixed_attn.plan_field_names("config"))
INDEX = {name: i for i, name in enumerate(FIELDS)}
CONFIG_INDEX = {name: i for i, name in enumerate(CONFIG_FIELDS)}
MAGIC = 0x6D69786564
MODE_SPLIT = 0
MODE_FOLD = 1
MODE_AUTO = 2  # per step split or fold by the step-cost estimate; a plan records the one chosen
MODE_NAMES = ("split", "fold", "auto")  # by DispatchMode value
EXTEND_KERNEL_NAMES = ("auto", "mma", "sm90", "cpu")
DECODE_KERNEL_NAMES = ("auto", "tensor_core", "portable", "cpu", "tensor_core_narrow")

# Defaults of the config fields a caller may leave out (the wrapper's defaults).
CONFIG_DEFAULTS = dict(window_left=-1, mode=MODE_SPLIT, deterministic=0, fixed_split_tokens=2048,
                       max_splits_per_row=32, min_split_tokens=256, ctas_per_sm=2, kv_fp8=0,
                       extend_kernel=0, decode_kernel=0, extend_kv_splits=0, extend_tma=-1,
                       extend_tile_tokens=0, graph_safe=0, graph_max_rows=0, graph_max_tokens=0,
                       graph_max_extend_tokens=0, graph_max_partials=0, graph_max_kv_pages=0,
                       decode_max_q=0, extend_persistent=-1, extend_item_parts=-1, pdl=-1, extend_block_rows=0,
                       extend_q_tma=-1, decode_kv_pack=0, extend_leave_sms=-1, decode_first=-1)

_device_descs = {}


def device_desc(device):
    """[kind, arch, num_sms, sm90_extend, tma_encoder, hip_mfma] of a device, queried once per device."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = str(device)
    if key not in _device_descs:
        _device_descs[key] = list(torch.ops.mixed_attn.device_desc(device))
    return _device_descs[key]


def make_config(device, page_size, num_qo_heads, num_kv_heads, head_dim, num_sms=None, **fields):
    """The planner's config list for a device; unknown field names are an error."""
    kind, arch, sms, sm90, tma, mfma = device_desc(device)
    values = dict(CONFIG_DEFAULTS)
    values.update(page_size=page_size, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads,
                  head_dim=head_dim, device_kind=kind, device_arch=arch,
                  num_sms=sms if num_sms is None else num_sms, device_sm90_extend=sm90,
                  device_tma_encoder=tma, device_hip_mfma=mfma)
    for name, value in fields.items():
        if name not in CONFIG_INDEX:
            raise TypeError(f"mixed_attn: unknown plan config field {name!r}")
        values[name] = int(value)
    return [int(values[name]) for name in CONFIG_FIELDS]


def meta_capacity(config, max_rows, max_tokens):
    """Entries of a metadata buffer that holds every plan of this config's launch policy up to
    max_rows rows and max_tokens tokens: the tiles of the smallest shape a step may take
    (launch_policy's last entry) and, where the policy may cut extend items, a counter per item."""
    policy = torch.ops.mixed_attn.launch_policy(config)
    pack, max_parts, min_tile = int(policy[2]), int(policy[10]), int(policy[11])
    head_groups = config[CONFIG_INDEX["num_qo_heads"]] // pack if max_parts > 1 else 0
    return int(torch.ops.mixed_attn.plan_meta_capacity(max_rows, max_tokens, min_tile, head_groups))


def field(info, name):
    """Value of one named field of a plan_info list."""
    return int(info[INDEX[name]])


def launch_summary(info):
    """The launch decisions a plan recorded, by name."""
    return {
        "extend_kernel": EXTEND_KERNEL_NAMES[field(info, "extend_kernel")],
        "extend_tile_tokens": field(info, "extend_tile_tokens"),
        "extend_block_rows": field(info, "extend_block_rows"),
        "extend_kv_splits": field(info, "extend_kv_splits"),
        "extend_tma": bool(field(info, "extend_tma")),
        "extend_q_tma": bool(field(info, "extend_q_tma")),
        "extend_ctas": field(info, "extend_ctas"),
        "extend_leave_sms": field(info, "extend_leave_sms"),
        "decode_first": bool(field(info, "decode_first")),
        "decode_kernel": DECODE_KERNEL_NAMES[field(info, "decode_kernel")],
        "decode_kv_pack": field(info, "decode_kv_pack"),
        "max_decode_splits": field(info, "max_splits"),
        "decode_max_q": field(info, "decode_max_q_policy"),
        "pdl": bool(field(info, "pdl")),
        "mode": MODE_NAMES[field(info, "mode")],
        "mode_requested": MODE_NAMES[field(info, "mode_requested")],
        "est_split_us": field(info, "est_split_ns") / 1000.0,
        "est_fold_us": field(info, "est_fold_ns") / 1000.0,
    }


def unpack_meta(info, meta):
    """Slices of the plan metadata buffer (a 1-D int32 tensor), by name.

    The arrays are views into ``meta``; ``extend_tiles`` has shape [Nt, 2].
    """
    B = field(info, "num_rows")
    Nd = field(info, "num_decode_rows")
    Nt = field(info, "num_extend_tiles")

    def take(name, n):
        off = field(info, name)
        return meta[off : off + n]

    return {
        "qo_indptr": take("off_qo_indptr", B + 1),
        "kv_indptr": take("off_kv_indptr", B + 1),
        "seq_lens": take("off_seq_lens", B),
        "decode_rows": take("off_decode_rows", Nd),
        "decode_split_indptr": take("off_decode_split_indptr", Nd + 1),
        "decode_kv_start": take("off_decode_kv_start", Nd),
        "decode_chunk_tokens": take("off_decode_chunk_tokens", Nd),
        "extend_tiles": take("off_extend_tiles", 2 * Nt).view(Nt, 2),
    }
