// Which row owns element x of a step's offset array (qo_indptr: a token's row; a graph-safe
// decode launch's decode_split_indptr: an arena slot's decode row). Plain C++ without GPU
// headers, so that tests/test_find_owner.py builds it with g++ and checks it on the CPU.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MA_FIND_OWNER_FN __host__ __device__ __forceinline__
#else
#define MA_FIND_OWNER_FN inline
#endif

namespace mixed_attn::gpu {

// The row d in [0, n) with offsets[d] <= x < offsets[d + 1], for offsets non-decreasing from
// offsets[0] = 0 to offsets[n] = total > x (`Offsets`: a pointer, or anything indexable).
// Rows of a step usually own equal shares (a decode-only step: one token and one split a
// row), so the first guess is x * n / total, which is exact there: one pair of independent
// loads, where a search of the whole range makes log2(n) dependent ones, each an L2 round
// trip before the CTA's first copy. Otherwise a binary search on the side the guess rules
// out (the last row whose offset is <= x: the owner, past any empty rows before it).
template <typename Offsets>
MA_FIND_OWNER_FN int find_owner(const Offsets& offsets, int n, int total, int x) {
  const int guess = int(static_cast<long long>(x) * n / total);
  const int at = offsets[guess], next = offsets[guess + 1];
  if (at <= x && x < next) return guess;
  int lo = x < at ? 0 : guess + 1, hi = x < at ? guess - 1 : n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace mixed_attn::gpu
