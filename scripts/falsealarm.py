#!/usr/bin/env python3
"""dorisarm scan against llvm-objdump-16 on real arm64 packages.

For each package directory (an extracted .deb) it scans the package with
`dorisarm scan --target TARGET --format json`, and disassembles every aarch64
ELF twice with llvm-objdump-16: with every extension (its default) and with
only the target's (--mattr=-all,ATTRS). A word that decodes in the first
listing and is <unknown> in the second is an instruction the target CPU
lacks: objdump confirms it. It is "unguarded" unless the listing shows a CPU
check around it, judged here on objdump's text with the shapes
internal/scan/guard.go documents (a branch on a flag loaded from memory or
on a bit of a function's result, past the instruction, away from it, or to
the start of the block that holds it; or a probe: the instruction and RET).

Per package it prints: ELF files; dorisarm's error-severity ISA findings and
the instructions they count; objdump's extension instructions and the
unguarded ones; false alarms (dorisarm errors objdump does not confirm as
unguarded, per file); misses (objdump-unguarded instructions dorisarm does not
report as errors, per file) and how many of those dorisarm reports guarded by
ifunc dispatch, its data table (internal/isa/dispatched.yaml) or their
callers, which the objdump side does not model ("by.known").
"""
import argparse
import bisect
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*([0-9a-f]+):\s*\t([a-z0-9.]+)\s*(.*)$")
TARGET = re.compile(r"\b0x([0-9a-f]+)\b")
REG = re.compile(r"^([wx])([0-9]+|zr)$")
COND_BR = {"cbz", "cbnz", "tbz", "tbnz"}
SVE = re.compile(r"(\b[zp]([0-9]|[12][0-9]|3[01])(\.[bhsdq]\b|/[zm]\b|\[))|^(cnt[bhwd]|rdvl|addvl|addpl|inc[bhwd]|dec[bhwd]|sq(inc|dec)[bhwd]|uq(inc|dec)[bhwd]|setffr|rdffr|wrffr|ptrues?|pfalse|ptest|whilel[eot]|whileh[is]|prf[bhwd])\b")
# Extensions whose instructions all use SVE registers (the objdump side counts
# instructions with SVE registers); SVE2.1's BF16 arithmetic is b16b16.
SVE_ONLY = {"f32mm", "f64mm", "b16b16"}
# dorisarm's shape guards, which the objdump side re-implements.
SHAPE = re.compile(r"behind the CPU check|reached only from the CPU check|a CPU probe")
SME = re.compile(r"\bza|^(smstart|smstop|rdsvl|addsvl|addspl)\b")


def listing(path, mattr):
    cmd = ["llvm-objdump-16", "-d", "--no-show-raw-insn", path]
    if mattr:
        cmd.insert(2, "--mattr=" + mattr)
    out = subprocess.run(cmd, capture_output=True, text=True, errors="replace").stdout
    ins = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), m.group(3).split("//")[0].strip()))
    return ins


def reg(op):
    m = REG.match(op.strip())
    return m.group(2) if m else None


def ops(s):
    return [o.strip() for o in s.split(",")]


def branch_target(mn, args):
    m = TARGET.search(args)
    return int(m.group(1), 16) if m else None


def ends_block(mn):
    return mn in ("ret", "b", "br") or mn.startswith("reta")


def is_store(mn):
    return mn.startswith("st") or mn in ("cmp", "cmn", "tst", "prfm") or mn.startswith("b") or mn in COND_BR


def is_global_base(ins, i, r, depth=3):
    if depth == 0:
        return False
    for j in range(i - 1, max(-1, i - 33), -1):
        mn, a = ins[j][1], ops(ins[j][2])
        if mn == "bl":
            return False
        if not a or reg(a[0]) != r or is_store(mn):
            continue
        if mn == "adrp":
            return True
        if mn == "add" and len(a) == 3 and a[2].startswith("#"):
            return is_global_base(ins, j, reg(a[1]), depth - 1)
        if mn == "ldr" and len(a) >= 2 and a[1].startswith("[x"):
            return is_global_base(ins, j, reg(a[1].strip("[]")), depth - 1)
        return False
    return False


def is_flag(ins, i, r, bit):
    for j in range(i - 1, max(-1, i - 33), -1):
        mn, a = ins[j][1], ops(ins[j][2])
        if ends_block(mn):
            return False
        if mn == "bl":
            return r == "0" and bit
        if not a or reg(a[0]) != r or is_store(mn):
            continue
        if mn == "ldrb":
            return True
        if mn in ("ldr", "ldrh") and len(a) >= 2 and a[1].startswith("[x"):
            return is_global_base(ins, j, reg(a[1].strip("[]")), 3)
        return False
    return False


def flag_branches(ins):
    """(index, address, target) of conditional branches on CPU flags."""
    out = []
    for i, (addr, mn, args) in enumerate(ins):
        a = ops(args)
        if mn in COND_BR:
            r, bit = reg(a[0]), mn.startswith("tb")
        elif mn.startswith("b.") and mn != "b.":
            r, bit = None, False
            for j in range(i - 1, max(-1, i - 4), -1):
                pm, pa = ins[j][1], ops(ins[j][2])
                if pm == "tst" and len(pa) == 2 and pa[1].startswith("#"):
                    v = int(pa[1][1:], 0)
                    r, bit = reg(pa[0]), v & (v - 1) == 0
                    break
                if pm == "cmp" and len(pa) == 2 and pa[1] == "#0x0":
                    r = reg(pa[0])
                    break
            if r is None:
                continue
        else:
            continue
        t = branch_target(mn, args)
        if t is not None and r is not None and is_flag(ins, i, r, bit):
            out.append((i, addr, t))
    return out


def guarded(ins, fbs, targets, i):
    addr = ins[i][0]
    for (bi, b, t) in fbs:
        if b >= addr or addr - b > 2048:
            continue
        between = [ins[k][1] for k in range(bi + 1, i)]
        if t > addr and t - b <= 8192 and "ret" not in between:
            return True
        if t <= b and not any(ends_block(m) for m in between):
            return True
    # jump-in: the block starts after a RET/B/BR and a flag branch targets it.
    j = i
    while j > 0 and i - j < 512 and not ends_block(ins[j - 1][1]):
        j -= 1
    if j > 0 and ends_block(ins[j - 1][1]) and ins[j][0] in targets and abs(targets[ins[j][0]] - ins[j][0]) <= 8192:
        return True
    # probe: the instruction and RET.
    if i + 1 < len(ins) and ins[i + 1][1] == "ret" and (i == 0 or ends_block(ins[i - 1][1]) or ins[i - 1][1] in ("nop", "bti")):
        return True
    return False


def objdump_side(path, base_attrs):
    full = listing(path, None)
    base = {a: mn for a, mn, _ in listing(path, "-all," + base_attrs)}
    # Words that do not decode (<unknown>) are not in either listing.
    ext = [i for i, (a, mn, _) in enumerate(full) if base.get(a) is None]
    fbs = flag_branches(full)
    fbs.sort(key=lambda x: x[1])
    targets = {t: b for (_, b, t) in fbs}
    addrs = [b for (_, b, _) in fbs]
    unguarded = 0
    for i in ext:
        a = full[i][0]
        lo = bisect.bisect_left(addrs, a - 2048)
        hi = bisect.bisect_left(addrs, a)
        if not guarded(full, fbs[lo:hi], targets, i):
            unguarded += 1
    sve = sum(1 for a, mn, args in full if not SME.search(mn + " " + args) and SVE.search(mn + " " + args))
    return len(ext), unguarded, sve


def dorisarm_side(dorisarm, target, pkgdir):
    p = subprocess.run([dorisarm, "scan", "--target", target, "--format", "json", pkgdir], capture_output=True, text=True)
    rep = json.loads(p.stdout)
    files = {f["path"]: f for f in rep.get("files") or [] if f.get("format") == "elf" and f.get("machine") == "aarch64"}
    err = defaultdict(lambda: [0, 0])  # path → [findings, instructions]
    known = defaultdict(int)  # path → instructions guarded by what objdump's side does not model
    for f in rep.get("findings") or []:
        if f["kind"] != "isa-extension":
            continue
        if f["severity"] == "error" and not f.get("allowed"):
            err[f["path"]][0] += 1
            err[f["path"]][1] += f.get("count", 0)
        elif f.get("guarded") and not SHAPE.search(f.get("detail", "")):
            # ifunc dispatch, internal/isa/dispatched.yaml, or callers behind checks
            known[f["path"]] += f.get("count", 0)
    return files, err, known


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dorisarm", default="bin/dorisarm")
    ap.add_argument("--target", default="generic-armv8")
    ap.add_argument("--attrs", default="+neon,+fp-armv8,+crc", help="llvm -mattr of the target's extensions")
    ap.add_argument("root")
    ap.add_argument("packages", nargs="+")
    a = ap.parse_args()
    hdr = f"{'package':<16} {'ELF':>4} {'dor.err':>8} {'dor.insn':>9} {'od.ext':>8} {'od.ungrd':>9} {'false.al':>9} {'misses':>7} {'by.known':>9}"
    print(hdr)
    tot = defaultdict(int)
    crypto = None
    for pkg in a.packages:
        d = os.path.join(a.root, pkg)
        files, err, known = dorisarm_side(a.dorisarm, a.target, d)
        row = defaultdict(int)
        row["elf"] = len(files)
        for rel, f in files.items():
            ext, ung, sve = objdump_side(os.path.join(d, rel), a.attrs)
            fa = max(0, err[rel][1] - ung)
            miss = max(0, ung - err[rel][1])
            row["err"] += err[rel][0]
            row["insn"] += err[rel][1]
            row["ext"] += ext
            row["ung"] += ung
            row["fa"] += fa
            row["miss"] += miss
            row["known"] += min(miss, known[rel])
            if os.path.basename(rel).startswith("libcrypto.so"):
                feats = f.get("features") or {}
                crypto = (rel, sum(v for k, v in feats.items() if k.startswith("sve") or k in SVE_ONLY), sve)
        print(f"{pkg:<16} {row['elf']:>4} {row['err']:>8} {row['insn']:>9} {row['ext']:>8} {row['ung']:>9} {row['fa']:>9} {row['miss']:>7} {row['known']:>9}")
        for k, v in row.items():
            tot[k] += v
        sys.stdout.flush()
    print(f"{'total':<16} {tot['elf']:>4} {tot['err']:>8} {tot['insn']:>9} {tot['ext']:>8} {tot['ung']:>9} {tot['fa']:>9} {tot['miss']:>7} {tot['known']:>9}")
    if crypto:
        rel, dor, od = crypto
        diff = 100.0 * (dor - od) / od if od else 0.0
        print(f"SVE instructions in {os.path.basename(rel)}: dorisarm {dor}, llvm-objdump {od} ({diff:+.1f}%)")


if __name__ == "__main__":
    main()
