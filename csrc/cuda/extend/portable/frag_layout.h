// Fragment layouts of the extend kernel's matrix instructions: which lane and
// register element holds which (row, col) of each operand, and how the kernel
// reads its score / output accumulators. Plain C++ without GPU headers, so that
// tests/test_extend_frag_layout.py can emulate the instructions on the CPU from
// these same functions and check the kernel's bookkeeping against a matmul.
//
// The masks, the online softmax and the epilogue of extend/portable/kernel.cuh are
// written once against an accumulator layout (AccLayout*): which query row and
// which column (key of S, head-dim column of O) element e of a lane holds, and
// which lanes share a row (the softmax reductions' shuffle masks).
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MA_FRAG_FN __host__ __device__ constexpr inline
#else
#define MA_FRAG_FN constexpr inline
#endif

namespace mixed_attn::gpu::extend_detail {

// v_mfma_f32_16x16x16f16 / v_mfma_f32_16x16x16bf16_1k (CDNA2 gfx90a, CDNA3
// gfx94x) on one 64-lane wavefront: D (16x16, fp32) = A (16x16, M x K) *
// B (16x16, K x N) + C. Each lane passes 4 b16 elements of A and of B (element e
// = bits [16e, 16e + 16) of the 64-bit operand) and holds 4 floats of C/D. As
// listed by AMD's matrix instruction calculator for these instructions: lane l
// holds A[l % 16][4 (l / 16) + e], B[4 (l / 16) + e][l % 16] and
// D[4 (l / 16) + e][l % 16].
struct Mfma16 {
  static constexpr int kLanes = 64, kDim = 16, kPerLane = 4;
  static MA_FRAG_FN int a_row(int lane) { return lane % 16; }
  static MA_FRAG_FN int a_k(int lane, int e) { return 4 * (lane / 16) + e; }
  static MA_FRAG_FN int b_col(int lane) { return lane % 16; }
  static MA_FRAG_FN int b_k(int lane, int e) { return 4 * (lane / 16) + e; }
  static MA_FRAG_FN int c_row(int lane, int e) { return 4 * (lane / 16) + e; }
  static MA_FRAG_FN int c_col(int lane) { return lane % 16; }
};

// Accumulator layouts. kNTile: columns per accumulator tile; a lane holds
// kRowsPerLane rows of it, kCols consecutive columns of each (element
// e = i * kCols + c), in kLanes lanes (a warp / wavefront) that cover 16 rows.
// The lanes holding one row differ only in bits
// [kRowLaneShift, kRowLaneShift + log2(kLanesPerRow)) of the lane id.
//
// NVIDIA, mma.sync m16n8k16 (PTX ISA): S = Q K^T, C rows are queries; lane l
// holds rows l / 4 and l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1.
struct AccLayoutMma16816 {
  static constexpr int kLanes = 32;
  static constexpr int kNTile = 8, kRowsPerLane = 2, kCols = 2, kLanesPerRow = 4, kRowLaneShift = 0;
  static MA_FRAG_FN int row(int lane, int i) { return lane / 4 + 8 * i; }
  static MA_FRAG_FN int col(int lane, int c) { return 2 * (lane % 4) + c; }
};

// NVIDIA, mma.sync m16n8k16 computed transposed (the narrow decode, decode/stage1_narrow.cuh):
// S^T = K Q^T, C rows are keys and columns the (query, head) rows of the softmax. Lane l holds
// rows 2 (l % 4) and 2 (l % 4) + 1, and of each the keys l / 4 and l / 4 + 8 (the kernel
// passes its C registers {c0, c2, c1, c3} so that element i * kCols + c is row i, key c);
// the 8 lanes of a row differ in lane bits 2..4.
struct AccLayoutMma16816T {
  static constexpr int kLanes = 32;
  static constexpr int kNTile = 16, kRowsPerLane = 2, kCols = 2, kLanesPerRow = 8, kRowLaneShift = 2;
  static MA_FRAG_FN int row(int lane, int i) { return 2 * (lane % 4) + i; }
  static MA_FRAG_FN int col(int lane, int c) { return lane / 4 + 8 * c; }
};

// AMD, MFMA 16x16x16, computed transposed: S^T = K Q^T and O^T = V^T P^T, so
// that queries are the accumulators' columns. Then each lane holds all its
// elements in one query row (l % 16) and 4 consecutive keys / head-dim columns
// (4 (l / 16) + e): the row max and sum reduce within the lane and across the 4
// lanes l ^ 16, l ^ 32, and the S^T accumulator is already, element for
// element, the B operand P^T of the second product (B[k][n] sits where C[k][n]
// does), so P needs no data movement between lanes.
struct AccLayoutMfma16 {
  static constexpr int kLanes = 64;
  static constexpr int kNTile = 16, kRowsPerLane = 1, kCols = 4, kLanesPerRow = 4, kRowLaneShift = 4;
  static MA_FRAG_FN int row(int lane, int) { return Mfma16::c_col(lane); }
  static MA_FRAG_FN int col(int lane, int c) { return Mfma16::c_row(lane, c); }
};

// The MFMA path's V tile lives transposed in LDS ([D rows][BN keys]): the A
// operand of O^T = V^T P^T is 4 consecutive keys of one head-dim column per
// lane, one 8-byte read there instead of four 2-byte reads from a [BN][D] tile.
// Units of 4 keys are XOR-swizzled per row so that the 16 rows (head-dim
// columns) that lanes 0-15 of one read touch fall in 16 different pairs of the
// 32 LDS banks. Element offset of (d, key):
template <int BN>
MA_FRAG_FN int vt_off(int d, int key) {
  static_assert(BN >= 16 && (BN & (BN - 1)) == 0, "V^T swizzle needs a power-of-two BN >= 16");
  constexpr int kUnits = BN / 4;                            // 8-byte units per row
  constexpr int kRowsPerSweep = BN >= 64 ? 1 : 64 / BN;     // rows per 128 bytes (32 banks)
  return d * BN + (((key / 4) ^ ((d / kRowsPerSweep) % kUnits)) * 4) + key % 4;
}

// What the MFMA path relies on, beyond the instruction's own layout:
//  - the S^T accumulator reused as the P^T operand: B[b_k][b_col] where C[c_row][c_col];
//  - each lane's 4 k elements are consecutive and start at a multiple of 4, so
//    they are one 8-byte read inside one 16-byte chunk of a swizzled tile.
MA_FRAG_FN bool mfma16_kernel_assumptions_hold() {
  for (int lane = 0; lane < Mfma16::kLanes; ++lane) {
    if (Mfma16::a_k(lane, 0) % 4 != 0 || Mfma16::b_k(lane, 0) % 4 != 0) return false;
    if (Mfma16::a_row(lane) != Mfma16::b_col(lane)) return false;
    for (int e = 0; e < Mfma16::kPerLane; ++e) {
      if (Mfma16::a_k(lane, e) != Mfma16::a_k(lane, 0) + e) return false;
      if (Mfma16::b_k(lane, e) != Mfma16::b_k(lane, 0) + e) return false;
      if (Mfma16::b_k(lane, e) != Mfma16::c_row(lane, e)) return false;
    }
    if (Mfma16::b_col(lane) != Mfma16::c_col(lane)) return false;
  }
  return true;
}
static_assert(mfma16_kernel_assumptions_hold(), "MFMA fragment layout assumptions");

}  // namespace mixed_attn::gpu::extend_detail
