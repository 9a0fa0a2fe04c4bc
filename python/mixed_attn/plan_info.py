"""Field indices of ``plan_info``, mirroring ``PlanInfoField`` in csrc/include/mixed_attn/plan.h."""

FIELDS = (
    "magic",
    "num_rows",
    "num_tokens",
    "mode",
    "num_decode_rows",
    "num_extend_rows",
    "num_extend_tiles",
    "extend_tile_tokens",
    "num_partials",
    "max_splits",
    "meta_len",
    "off_qo_indptr",
    "off_kv_indptr",
    "off_seq_lens",
    "off_decode_rows",
    "off_decode_split_indptr",
    "off_decode_kv_start",
    "off_decode_chunk_tokens",
    "off_extend_tiles",
    "num_kv_pages",
    "page_size",
    "num_qo_heads",
    "num_kv_heads",
    "head_dim",
    "window_left",
    "deterministic",
    "max_q_len",
    "max_seq_len",
)
INDEX = {name: i for i, name in enumerate(FIELDS)}
MAGIC = 0x6D69786564
MODE_SPLIT = 0
MODE_FOLD = 1


def field(info, name):
    """Value of one named field of a plan_info list."""
    return int(info[INDEX[name]])


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
