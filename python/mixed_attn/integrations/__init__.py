"""Adapters that plug mixed_attn into other projects' serving loops.

Each adapter lives in its own module and imports its host project lazily, so `import mixed_attn`
never needs any of them installed:

    import mixed_attn.integrations.transformers as ma_tf
    ma_tf.register()            # -> "paged|mixed_attn" in transformers' AttentionInterface
"""
