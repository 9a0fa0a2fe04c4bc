#!/usr/bin/env bash
# Issue 13, one device call (~6.5 minutes warm): FlashInfer's paged FA3 tile at head dim 128 on
# our kernel. FA3 there is 2 consumer warpgroups x 128 query rows, 96-key K/V tiles, 2 stages,
# cp.async (prefill_sm90.cuh's BatchPrefillWithPagedKVCacheDispatched); ours is 3 x 64 rows with
# 128-key tiles, and our 2-warpgroup build at 128 keys measured 0.97-1.00 ms on B against 0.85.
# Apply the three patches here first, in this order (git apply tools/pending/sm90_wg_turns.patch
# tools/pending/sm90_bn96.patch tools/pending/sm90_overlap_rescale_early.patch; the first two are
# off by default, the third changes the two-warpgroup loop), carry .peers for FA3's rows.
# Variants: the default; 96-key tiles with 3 warpgroups (2 and 3 stages); 96-key tiles with 2
# warpgroups, without and with the warpgroups' turns (FA3's ping-pong). Cases B, D, B-p1.
set -uo pipefail
cd "$(dirname "$0")/../.."
grep -q "WgmmaSS<96" csrc/cuda/extend/sm90/wgmma.cuh || { echo "apply sm90_bn96.patch first"; exit 1; }
grep -q "MA_SM90_WG_ORDER" csrc/cuda/extend/sm90/traits.cuh || { echo "apply sm90_wg_turns.patch first"; exit 1; }
grep -q "MA_SM90_RESCALE_EARLY" csrc/cuda/extend/sm90/mainloop.cuh || { echo "apply sm90_overlap_rescale_early.patch"; exit 1; }
B96="-DMA_SM90_D128_BN=96"
VARIANTS=${VARIANTS:-"none;$B96;$B96 -DMA_SM90_D128_ST=3;$B96 -DMA_SM90_D128_WGS=2;$B96 -DMA_SM90_D128_WGS=2 -DMA_SM90_WG_ORDER=2"} \
  CASES=${CASES:-B,D,B-p1} bash tools/pending/bf16_gap.sh
