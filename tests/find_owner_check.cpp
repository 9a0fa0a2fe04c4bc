// CPU check of csrc/cuda/common/find_owner.h, built with g++ by tests/test_find_owner.py: every
// x of random offset arrays (equal shares, random shares, empty rows, one row) against a linear
// scan, and the loads it makes: two where rows own equal shares (the guess), at most
// 2 + ceil(log2(n)) + 1 otherwise. Prints one line per group and "ALL OK"; exits 1 on a failure.
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/common/find_owner.h"

namespace {

struct Counted {  // an offsets array that counts its reads
  const std::vector<int>* v;
  mutable long long reads = 0;
  int operator[](int i) const {
    ++reads;
    return (*v)[size_t(i)];
  }
};

int failures = 0;

// Checks every x of `offsets` (n + 1 entries); returns the most reads one call made.
long long check(const std::vector<int>& offsets, const char* what) {
  const int n = int(offsets.size()) - 1, total = offsets[size_t(n)];
  long long most = 0;
  for (int x = 0; x < total; ++x) {
    int want = 0;
    for (int d = 0; d < n; ++d)
      if (offsets[size_t(d)] <= x && x < offsets[size_t(d) + 1]) want = d;
    Counted c{&offsets};
    const int got = mixed_attn::gpu::find_owner(c, n, total, x);
    if (got != want && ++failures <= 20)
      std::printf("FAIL %s: n=%d total=%d x=%d got %d want %d\n", what, n, total, x, got, want);
    most = c.reads > most ? c.reads : most;
  }
  return most;
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

int main() {
  std::mt19937 rng(1234);
  // Equal shares: one guess, two reads, every x.
  long long most_equal = 0;
  for (int n : {1, 2, 3, 7, 64, 128, 129, 1000})
    for (int share : {1, 2, 3, 8, 16}) {
      std::vector<int> off(size_t(n) + 1);
      for (int d = 0; d <= n; ++d) off[size_t(d)] = d * share;
      const long long m = check(off, "equal");
      most_equal = m > most_equal ? m : most_equal;
    }
  if (most_equal != 2) ++failures;
  std::printf("equal shares: at most %lld reads a call (want 2)\n", most_equal);
  // Random shares (1..40) and shares with empty rows (0..5), one long row among short ones.
  long long worst_excess = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + int(rng() % 300);
    const int kind = trial % 3;
    std::vector<int> off(size_t(n) + 1, 0);
    for (int d = 0; d < n; ++d) {
      int share = kind == 0 ? 1 + int(rng() % 40) : kind == 1 ? int(rng() % 6) : (d == 0 ? 4096 : 1);
      off[size_t(d) + 1] = off[size_t(d)] + share;
    }
    if (off[size_t(n)] == 0) off[size_t(n)] = 1;  // at least one element (x < total)
    const long long m = check(off, kind == 0 ? "random" : kind == 1 ? "empty rows" : "one long row");
    const long long excess = m - (2 + ceil_log2(n) + 1);
    worst_excess = excess > worst_excess ? excess : worst_excess;
  }
  if (worst_excess > 0) ++failures;
  std::printf("random shares: reads a call at most 2 + ceil(log2 n) + 1 (excess %lld)\n", worst_excess);
  std::printf(failures == 0 ? "ALL OK\n" : "FAILED (%d)\n", failures);
  return failures == 0 ? 0 : 1;
}
