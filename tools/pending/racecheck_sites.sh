#!/usr/bin/env bash
# racecheck over the -k sanitize subset, its reports classified into $OUT/racecheck_sites.txt (the
# raw log is too large to bring back): the distinct access sites with counts, the message kinds,
# the first messages with context. Needs a build in place.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"; export PYTHONPATH=$PWD/python
ls python/mixed_attn/_C*.so >/dev/null 2>&1 || { echo "racecheck_sites: no build in place"; exit 1; }
L=$OUT/racecheck.log
timeout 240 compute-sanitizer --tool racecheck python3 -m pytest -q -p no:cacheprovider tests -k sanitize -rA > $L 2>&1
{ grep -E "RACECHECK SUMMARY|passed|failed" $L | tail -3
  echo "--- sites"; grep -E "access at" $L | sed -E 's/ and (Write|Read)/\n\1/g' \
    | grep -oE "(Write|Read) access at .*\+0x[0-9a-f]+ in [^ ]+:[0-9]+" | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | sort -rn
  echo "--- message kinds"; grep -oE "=========  *[A-Z][a-z]+[^(]*" $L | sed -E 's/0x[0-9a-f]+//g' | sort | uniq -c | sort -rn | head -20
  echo "--- context"; grep -m3 -B2 -A8 "Potential invalid" $L
  echo "--- tests with reports"; grep -E "^tests/.*(PASSED|FAILED)" $L | head -120; } > $OUT/racecheck_sites.txt
rm -f $L
