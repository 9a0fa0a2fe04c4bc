// CPU replay of the extend kernel's fragment bookkeeping, built with g++ and run by
// tests/test_extend_frag_layout.py (no GPU needed).
//
// AMD path: v_mfma_f32_16x16x16 is emulated from the lane layout in
// csrc/cuda/extend/portable/frag_layout.h (Mfma16), and one wavefront's K/V tile is replayed
// the way extend/portable/kernel.cuh's HIP branch does it: S^T = K Q^T from the K tile and
// Q^T fragments, causal mask and online softmax through AccLayoutMfma16 (with the
// cross-lane reductions simulated as shuffles), the S^T accumulators handed over
// unchanged as the P^T operand, O^T += V^T P^T from the transposed V tile (vt_off),
// and the epilogue's stores. Every step is compared with a plain fp64 computation.
// NVIDIA path: the masks / softmax / epilogue, which are now written against
// AccLayoutMma16816, are replayed on accumulators laid out as the PTX ISA documents
// for mma.m16n8k16.
//
// Prints one line per check group and "ALL OK" at the end; exits 1 on any failure.
// With --dump-mfma-layout it prints the Mfma16 table (lane, element, A/B/C coords)
// instead, for the test's independent comparison with AMD's documented layout.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/extend/portable/frag_layout.h"

using namespace mixed_attn::gpu::extend_detail;

namespace {

int g_failures = 0;
#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      if (++g_failures <= 20) {                                        \
        std::printf("FAIL line %d: ", __LINE__);                       \
        std::printf(__VA_ARGS__);                                      \
        std::printf("\n");                                             \
      }                                                                \
    }                                                                  \
  } while (0)

// bf16 round to nearest even (what MmaType<bf16>::pack does on both vendors).
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

using Frag = float[64][4];  // an MFMA operand or accumulator: 4 elements per lane

// D = A B + C, each given per lane / element as the instruction sees its registers.
// Also checks that the layout gives every matrix element exactly one home.
void mfma16(Frag& d, const Frag& a, const Frag& b, const Frag& c) {
  double A[16][16], B[16][16], C[16][16];
  int na[16][16] = {}, nb[16][16] = {}, nc[16][16] = {};
  for (int l = 0; l < 64; ++l)
    for (int e = 0; e < 4; ++e) {
      const int ai = Mfma16::a_row(l), ak = Mfma16::a_k(l, e);
      const int bk = Mfma16::b_k(l, e), bj = Mfma16::b_col(l);
      const int ci = Mfma16::c_row(l, e), cj = Mfma16::c_col(l);
      A[ai][ak] = a[l][e], ++na[ai][ak];
      B[bk][bj] = b[l][e], ++nb[bk][bj];
      C[ci][cj] = c[l][e], ++nc[ci][cj];
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      CHECK(na[i][j] == 1 && nb[i][j] == 1 && nc[i][j] == 1, "mfma layout not a bijection at (%d,%d)", i, j);
  for (int l = 0; l < 64; ++l)
    for (int e = 0; e < 4; ++e) {
      const int i = Mfma16::c_row(l, e), j = Mfma16::c_col(l);
      double s = C[i][j];
      for (int k = 0; k < 16; ++k) s += A[i][k] * B[k][j];
      d[l][e] = float(s);
    }
}

// The cross-lane reduction the kernel does with MA_SHFL_XOR(v, step << kRowLaneShift).
template <class L, class Op>
void shuffle_reduce(std::vector<float>& v, Op op) {
  for (int step = 1; step < L::kLanesPerRow; step *= 2) {
    std::vector<float> before = v;
    for (int l = 0; l < L::kLanes; ++l) {
      const int partner = l ^ (step << L::kRowLaneShift);
      CHECK(partner < L::kLanes, "shuffle partner %d outside the warp", partner);
      if (partner < L::kLanes) v[l] = op(before[l], before[partner]);
    }
  }
}

// Structural checks of an accumulator layout: each (row, col) of a 16 x kNTile tile
// held once; the lanes reached by the shuffle masks are exactly the lanes of the row;
// exactly one lane per row has col(lane, 0) == 0 (the LSE writer); pairs of columns
// (c, c + 1) are adjacent and start even (the epilogue's 4-byte stores).
template <class L>
void check_acc_layout(const char* name) {
  const int before = g_failures;
  int count[16][L::kNTile] = {};
  for (int l = 0; l < L::kLanes; ++l)
    for (int i = 0; i < L::kRowsPerLane; ++i)
      for (int c = 0; c < L::kCols; ++c) {
        const int r = L::row(l, i), col = L::col(l, c);
        CHECK(r >= 0 && r < 16 && col >= 0 && col < L::kNTile, "%s: out of range", name);
        ++count[r][col];
        if (c % 2 == 0) CHECK(col % 2 == 0 && L::col(l, c + 1) == col + 1, "%s: store pair", name);
      }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < L::kNTile; ++c)
      CHECK(count[r][c] == 1, "%s: (%d,%d) held %d times", name, r, c, count[r][c]);
  for (int l = 0; l < L::kLanes; ++l) {
    std::vector<int> reach;
    for (int x = 0; x < L::kLanesPerRow; ++x) reach.push_back(l ^ (x << L::kRowLaneShift));
    for (int m = 0; m < L::kLanes; ++m) {
      bool same_rows = true;
      for (int i = 0; i < L::kRowsPerLane; ++i) same_rows &= L::row(m, i) == L::row(l, i);
      bool reached = false;
      for (int x : reach) reached |= x == m;
      CHECK(same_rows == reached, "%s: lane %d vs %d: row sharing != shuffle reach", name, l, m);
    }
  }
  int writers[16] = {};
  for (int l = 0; l < L::kLanes; ++l)
    if (L::col(l, 0) == 0)
      for (int i = 0; i < L::kRowsPerLane; ++i) ++writers[L::row(l, i)];
  for (int r = 0; r < 16; ++r) CHECK(writers[r] == 1, "%s: row %d has %d LSE writers", name, r, writers[r]);
  std::printf("%s accumulator layout: %s\n", name, g_failures == before ? "ok" : "FAILED");
}

// Replays masks + online softmax (one tile, from a -inf running max) on accumulators
// `acc[n]` (n = accumulator tile of kNTile keys) the way extend/portable/kernel.cuh does through
// AccLayout L, in base-2 units with multiplier 1. Row r's absolute position is
// pos0 + r; keys are n0 + column. Returns the per-lane row sums (after the epilogue's
// reduction) and the row max per lane; acc becomes P.
template <class L>
void replay_softmax(std::vector<std::array<float, 4>>* acc, int n_tiles, int pos0, int n0,
                    std::vector<float>& row_max, std::vector<float>& row_sum) {
  static_assert(L::kRowsPerLane * L::kCols == 4, "4 accumulator elements per lane and tile");
  row_max.assign(L::kLanes * L::kRowsPerLane, 0.f);
  row_sum.assign(L::kLanes * L::kRowsPerLane, 0.f);
  for (int l = 0; l < L::kLanes; ++l)  // mask (kernel: needs_mask branch)
    for (int n = 0; n < n_tiles; ++n)
      for (int e = 0; e < 4; ++e) {
        const int j = n0 + n * L::kNTile + L::col(l, e % L::kCols);
        const int p = pos0 + L::row(l, e / L::kCols);
        if (j > p) acc[n][l][e] = -INFINITY;
      }
  for (int i = 0; i < L::kRowsPerLane; ++i) {
    std::vector<float> mx(L::kLanes, -INFINITY), sum(L::kLanes, 0.f);
    for (int l = 0; l < L::kLanes; ++l)
      for (int n = 0; n < n_tiles; ++n)
        for (int c = 0; c < L::kCols; ++c) mx[l] = std::fmax(mx[l], acc[n][l][i * L::kCols + c]);
    shuffle_reduce<L>(mx, [](float x, float y) { return std::fmax(x, y); });
    for (int l = 0; l < L::kLanes; ++l) {
      for (int n = 0; n < n_tiles; ++n)
        for (int c = 0; c < L::kCols; ++c) {
          float& s = acc[n][l][i * L::kCols + c];
          s = std::exp2(s - mx[l]);
          sum[l] += s;
        }
    }
    shuffle_reduce<L>(sum, [](float x, float y) { return x + y; });
    for (int l = 0; l < L::kLanes; ++l) {
      row_max[l * L::kRowsPerLane + i] = mx[l];
      row_sum[l * L::kRowsPerLane + i] = sum[l];
    }
  }
}

struct Problem {
  int D, BN, pos0, n0;
  std::vector<float> q, k, v;  // [16][D], [BN][D], [BN][D], bf16 values
  std::vector<double> s, p, o;  // reference: scores [16][BN], P [16][BN], O [16][D] (unnormalised)
  std::vector<double> m, l;     // row max, row sum
};

Problem make_problem(int D, int BN, int pos0, int n0, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Problem pr{D, BN, pos0, n0, {}, {}, {}, {}, {}, {}, {}, {}};
  for (int i = 0; i < 16 * D; ++i) pr.q.push_back(round_bf16(nd(rng)));
  for (int i = 0; i < BN * D; ++i) pr.k.push_back(round_bf16(nd(rng)));
  for (int i = 0; i < BN * D; ++i) pr.v.push_back(round_bf16(nd(rng)));
  pr.s.assign(16 * BN, 0.0);
  pr.p.assign(16 * BN, 0.0);
  pr.o.assign(16 * D, 0.0);
  for (int r = 0; r < 16; ++r) {
    double mx = -INFINITY;
    for (int j = 0; j < BN; ++j) {
      double s = 0;
      for (int d = 0; d < D; ++d) s += double(pr.q[r * D + d]) * pr.k[j * D + d];
      s *= 0.125;  // keeps exp2 in range; applied to Q below so the kernel sees the same
      if (n0 + j > pos0 + r) s = -INFINITY;
      pr.s[r * BN + j] = s;
      mx = std::fmax(mx, s);
    }
    double sum = 0;
    for (int j = 0; j < BN; ++j) {
      pr.p[r * BN + j] = std::exp2(pr.s[r * BN + j] - mx);
      sum += pr.p[r * BN + j];
    }
    pr.m.push_back(mx);
    pr.l.push_back(sum);
    for (int d = 0; d < D; ++d) {
      double acc = 0;
      for (int j = 0; j < BN; ++j) acc += double(round_bf16(float(pr.p[r * BN + j]))) * pr.v[j * D + d];
      pr.o[r * D + d] = acc;
    }
  }
  for (float& x : pr.q) x *= 0.125f;  // exact (power of two)
  return pr;
}

bool close(double got, double want, double tol) {
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * (1.0 + std::fabs(want));
}

// The HIP path of extend/portable/kernel.cuh for one 16-query m-tile and one K/V tile.
template <int BN>
void replay_mfma_tile(int D, int pos0, int n0, std::mt19937& rng) {
  const int before = g_failures;
  Problem pr = make_problem(D, BN, pos0, n0, rng);
  const int k_steps = D / 16, n_tiles_s = BN / 16, n_tiles_o = D / 16;

  // V tile staged transposed (put_v_transposed): check vt_off is a bijection and
  // that a lane's 4 keys are contiguous (one 8-byte read, 8-byte aligned).
  std::vector<float> vt(size_t(D) * BN, NAN);
  std::vector<int> hits(size_t(D) * BN, 0);
  for (int key = 0; key < BN; ++key)
    for (int d = 0; d < D; ++d) {
      const int off = vt_off<BN>(d, key);
      CHECK(off >= 0 && off < D * BN, "vt_off out of range");
      ++hits[off];
      vt[off] = pr.v[key * D + d];
    }
  for (int h : hits) CHECK(h == 1, "vt_off is not a bijection");

  // S^T = K Q^T.
  std::vector<std::array<float, 4>>* s_tiles = new std::vector<std::array<float, 4>>[n_tiles_s];
  for (int n = 0; n < n_tiles_s; ++n) s_tiles[n].assign(64, {0.f, 0.f, 0.f, 0.f});
  for (int kk = 0; kk < k_steps; ++kk)
    for (int n = 0; n < n_tiles_s; ++n) {
      Frag a, b, c, d;
      for (int l = 0; l < 64; ++l)
        for (int e = 0; e < 4; ++e) {
          // kernel: lds_load_operand(k_s + swz_elem(n*16 + a_row, kk*16 + a_k(l, 0))), 4 consecutive
          a[l][e] = pr.k[(n * 16 + Mfma16::a_row(l)) * D + kk * 16 + Mfma16::a_k(l, 0) + e];
          // kernel: load_q_frag: query b_col(l), head dims kk*16 + b_k(l, 0) ..
          b[l][e] = pr.q[Mfma16::b_col(l) * D + kk * 16 + Mfma16::b_k(l, 0) + e];
          c[l][e] = s_tiles[n][l][e];
        }
      mfma16(d, a, b, c);
      for (int l = 0; l < 64; ++l)
        for (int e = 0; e < 4; ++e) s_tiles[n][l][e] = d[l][e];
    }
  using L = AccLayoutMfma16;
  for (int n = 0; n < n_tiles_s; ++n)  // S read back through the accumulator layout (before the mask)
    for (int l = 0; l < 64; ++l)
      for (int e = 0; e < 4; ++e) {
        const int r = L::row(l, e / L::kCols), j = n * L::kNTile + L::col(l, e % L::kCols);
        double want = 0;
        for (int dd = 0; dd < D; ++dd) want += double(pr.q[r * D + dd]) * pr.k[j * D + dd];
        CHECK(close(s_tiles[n][l][e], want, 1e-5), "S^T (%d,%d): %g vs %g", r, j, s_tiles[n][l][e], want);
      }

  std::vector<float> row_max, row_sum;
  replay_softmax<L>(s_tiles, n_tiles_s, pos0, n0, row_max, row_sum);
  for (int n = 0; n < n_tiles_s; ++n)
    for (int l = 0; l < 64; ++l)
      for (int e = 0; e < 4; ++e) {
        const int r = L::row(l, e / L::kCols), j = n * L::kNTile + L::col(l, e % L::kCols);
        CHECK(close(s_tiles[n][l][e], pr.p[r * BN + j], 1e-5), "P (%d,%d)", r, j);
      }

  // O^T += V^T P^T: P^T operand = the S^T accumulator of key-step kk, element for element.
  std::vector<std::array<float, 4>> o_tiles(size_t(n_tiles_o) * 64, {0.f, 0.f, 0.f, 0.f});
  for (int kk = 0; kk < BN / 16; ++kk)
    for (int dn = 0; dn < n_tiles_o; ++dn) {
      Frag a, b, c, d;
      for (int l = 0; l < 64; ++l) {
        const int off0 = vt_off<BN>(dn * 16 + Mfma16::a_row(l), kk * 16 + Mfma16::a_k(l, 0));
        CHECK(off0 % 4 == 0, "V^T read not 8-byte aligned");
        for (int e = 0; e < 4; ++e) {
          a[l][e] = vt[off0 + e];  // kernel: lds_load_operand(v_s + vt_off(...)), 4 consecutive
          b[l][e] = round_bf16(s_tiles[kk][l][e]);  // kernel: MmaType::pack of s_acc[mt][kk][0..3]
          c[l][e] = o_tiles[dn * 64 + l][e];
        }
      }
      mfma16(d, a, b, c);
      for (int l = 0; l < 64; ++l)
        for (int e = 0; e < 4; ++e) o_tiles[dn * 64 + l][e] = d[l][e];
    }

  // Epilogue: row sums, LSE lane, stores of (c, c + 1) pairs.
  std::vector<int> written(16 * D, 0);
  for (int l = 0; l < 64; ++l) {
    const int r = L::row(l, 0);
    CHECK(close(row_sum[l], pr.l[r], 1e-5), "row sum %d", r);
    CHECK(close(row_max[l], pr.m[r], 1e-6), "row max %d", r);
    for (int dn = 0; dn < n_tiles_o; ++dn)
      for (int c = 0; c < L::kCols; c += 2)
        for (int x = 0; x < 2; ++x) {
          const int col = dn * L::kNTile + L::col(l, c) + x;
          ++written[r * D + col];
          CHECK(close(o_tiles[dn * 64 + l][c + x], pr.o[r * D + col], 1e-4), "O (%d,%d): %g vs %g", r,
                col, o_tiles[dn * 64 + l][c + x], pr.o[r * D + col]);
        }
  }
  for (int w : written) CHECK(w == 1, "an output element is not written exactly once");
  delete[] s_tiles;
  std::printf("MFMA replay D=%d BN=%d pos0=%d n0=%d: %s\n", D, BN, pos0, n0, g_failures == before ? "ok" : "FAILED");
}

// NVIDIA: the layout-generic mask / softmax / epilogue on accumulators placed as the
// PTX ISA documents for mma.m16n8k16 (c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..)).
void replay_mma16816_softmax(int BN, int pos0, int n0, std::mt19937& rng) {
  const int before = g_failures;
  Problem pr = make_problem(64, BN, pos0, n0, rng);
  using L = AccLayoutMma16816;
  const int n_tiles = BN / 8;
  std::vector<std::array<float, 4>>* acc = new std::vector<std::array<float, 4>>[n_tiles];
  for (int n = 0; n < n_tiles; ++n) {
    acc[n].assign(32, {0.f, 0.f, 0.f, 0.f});
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e) {
        const int g = l / 4, t = l % 4;
        const int r = g + 8 * (e / 2), j = n * 8 + 2 * t + (e % 2);  // PTX ISA, independent of L
        double s = 0;
        for (int d = 0; d < 64; ++d) s += double(pr.q[r * 64 + d]) * pr.k[j * 64 + d];
        acc[n][l][e] = float(s);
      }
  }
  std::vector<float> row_max, row_sum;
  replay_softmax<L>(acc, n_tiles, pos0, n0, row_max, row_sum);
  for (int n = 0; n < n_tiles; ++n)
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e) {
        const int r = l / 4 + 8 * (e / 2), j = n * 8 + 2 * (l % 4) + (e % 2);
        CHECK(close(acc[n][l][e], pr.p[r * BN + j], 1e-5), "NV P (%d,%d)", r, j);
      }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 2; ++i) {
      CHECK(close(row_sum[l * 2 + i], pr.l[l / 4 + 8 * i], 1e-5), "NV row sum");
      CHECK(close(row_max[l * 2 + i], pr.m[l / 4 + 8 * i], 1e-6), "NV row max");
    }
  delete[] acc;
  std::printf("mma.m16n8k16 softmax replay BN=%d pos0=%d n0=%d: %s\n", BN, pos0, n0,
              g_failures == before ? "ok" : "FAILED");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--dump-mfma-layout") == 0) {
    for (int l = 0; l < 64; ++l)
      for (int e = 0; e < 4; ++e)
        std::printf("%d %d %d %d %d %d %d %d\n", l, e, Mfma16::a_row(l), Mfma16::a_k(l, e),
                    Mfma16::b_k(l, e), Mfma16::b_col(l), Mfma16::c_row(l, e), Mfma16::c_col(l));
    return 0;
  }
  std::mt19937 rng(1234);
  check_acc_layout<AccLayoutMfma16>("MFMA 16x16x16 (S^T)");
  check_acc_layout<AccLayoutMma16816>("mma.m16n8k16");
  // Head dims and key-tile widths of the HIP shapes (and more); pos0 / n0 put the causal
  // diagonal inside the tile (masked keys), before it, or past it.
  replay_mfma_tile<16>(256, 100, 100, rng);
  replay_mfma_tile<32>(128, 40, 32, rng);
  replay_mfma_tile<32>(64, 1000, 0, rng);
  replay_mfma_tile<64>(64, 7, 0, rng);
  replay_mfma_tile<64>(128, 70, 64, rng);
  replay_mma16816_softmax(64, 30, 16, rng);
  replay_mma16816_softmax(32, 500, 0, rng);
  if (g_failures) {
    std::printf("%d FAILURES\n", g_failures);
    return 1;
  }
  std::printf("ALL OK\n");
  return 0;
}
