#!/usr/bin/env python3
"""Compare two dumps of tools/ptx_dump.sh (before / after a change).

  tools/ptx_compare.py BEFORE_DIR AFTER_DIR [--diff ENTRY_SUBSTRING]

Per .cu file: whether the PTX is identical; per kernel: registers and spills before / after,
and, where the PTX differs, the change in the count of each instruction (opcode with its
type suffixes), which says what a change did (e.g. `ex2.approx.f32 -4, ex2.approx.ftz.f32 +4`).
"""
import collections
import difflib
import os
import re
import sys


def ptxas_report(path):
    """kernel name -> (registers, spill stores, spill loads)."""
    out, cur = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = m.group(1)
            out[cur] = [None, 0, 0]
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            out[cur][1], out[cur][2] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out[cur][0] = int(m.group(1))
    return out


def ptx_entries(path):
    """kernel name -> list of instruction lines (comments and blank lines dropped)."""
    entries, cur = {}, None
    for line in open(path):
        m = re.match(r"\s*\.(visible|weak)?\s*\.entry\s+(\S+)\(", line)
        if m:
            cur = m.group(2)
            entries[cur] = []
            continue
        if cur is None:
            continue
        s = line.split("//")[0].strip()
        if s:
            entries[cur].append(s)
    return entries


def opcode(line):
    s = re.sub(r"^@!?%p\d+\s+", "", line)
    tok = s.split()[0] if s.split() else ""
    return tok if re.match(r"^[a-z][\w.:]*$", tok) and not tok.startswith("$") else None


def normalise(lines):
    # Register numbers and labels shift with any change; compare with them abstracted.
    return [re.sub(r"%(r|rd|f|fd|p|h|hh|rs)\d+", r"%\1", re.sub(r"\$L__\w+", "$L", l)) for l in lines]


def main():
    before, after = sys.argv[1], sys.argv[2]
    show = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--diff" else None
    files = sorted(f[:-4] for f in os.listdir(before) if f.endswith(".ptx"))
    for f in files:
        pb, pa = os.path.join(before, f + ".ptx"), os.path.join(after, f + ".ptx")
        if not os.path.exists(pa):
            print(f"{f}.cu: missing after")
            continue
        eb, ea = ptx_entries(pb), ptx_entries(pa)
        rb = ptxas_report(os.path.join(before, f + ".ptxas.txt"))
        ra = ptxas_report(os.path.join(after, f + ".ptxas.txt"))
        same = open(pb).read() == open(pa).read()
        print(f"== {f}.cu: PTX {'identical' if same else 'differs'}")
        for k in sorted(set(eb) | set(ea)):
            if k not in ea:
                print(f"  - {k}: removed")
                continue
            if k not in eb:
                print(f"  + {k}: new, regs {ra.get(k, ['?'])[0]}, spills {ra.get(k, [0, 0, 0])[1:]}")
                continue
            b, a = eb[k], ea[k]
            rb_, ra_ = rb.get(k, [None, 0, 0]), ra.get(k, [None, 0, 0])
            flag = ""
            if ra_[0] is not None and rb_[0] is not None and ra_[0] > rb_[0]:
                flag += " REGS UP"
            if ra_[1] > 0 or ra_[2] > 0:
                flag += " SPILLS"
            if b == a:
                state = "identical"
            elif normalise(b) == normalise(a):
                state = "same but register numbering"
            else:
                cb = collections.Counter(filter(None, map(opcode, b)))
                ca = collections.Counter(filter(None, map(opcode, a)))
                delta = {op: ca[op] - cb[op] for op in set(cb) | set(ca) if ca[op] != cb[op]}
                state = "differs: " + (", ".join(f"{op} {d:+d}" for op, d in sorted(delta.items())) or "order only")
            print(f"  {k}: regs {rb_[0]}->{ra_[0]} spill st/ld {rb_[1]}/{rb_[2]}->{ra_[1]}/{ra_[2]}{flag}; {state}")
            if show and show in k and b != a:
                sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in normalise(b)],
                                                           [l + "\n" for l in normalise(a)], n=2))


if __name__ == "__main__":
    main()
