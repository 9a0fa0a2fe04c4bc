// CPU implementation of the mixed step: the same algorithm as the GPU path
// (KV save, extend tiles, split-KV decode partials in the arena, merge), in
// plain C++ with fp32 accumulation. Slow by design; it exists to be right and
// to exercise the planner, the arena and the op end to end without a GPU.
#pragma once
#include "mixed_attn/params.h"

namespace mixed_attn::cpu {

void save_kv(const SaveKVParams& p);
void extend(const ExtendParams& p);
void decode(const DecodeParams& p);  // stage-1 partials, then the merge

}  // namespace mixed_attn::cpu
