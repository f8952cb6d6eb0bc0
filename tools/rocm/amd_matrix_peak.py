#!/usr/bin/env python3
"""How much of each AMD target's matrix peak the GEMM tiles and flash attention could reach, judged by the
instruction mix of their main loops alone: an upper bound from the compiler's assembly, nothing measured (no AMD
GPU here), blind to memory bandwidth, latency, dependency stalls and LDS bank conflicts. Reads the device assembly
of a `hip` build with -DHD_HIP_SAVE_ASSEMBLY=ON (a build dir, found as amd_kernel_report.py finds it, or any
directory of *-hip-amdgcn-amd-amdhsa-gfx*.s copies) and writes Markdown; the model is in MODEL.

The main loop. A loop is a label with a backward branch to it (s_cbranch_* or s_branch: a rotated loop may close
with s_branch and leave by a forward conditional branch). Labels that clang's block comments put in one loop
("=>This Loop Header", "in Loop: Header=BBx_y") are one loop with several latches, spanning its first such label
to its last backward branch, over however many basic blocks. The main loop is the innermost loop holding matrix
instructions (v_mfma_*, v_wmma_*). It is counted twice: its whole body, each instruction once; and one iteration
along the fall-through path (conditional branches not taken, unconditional ones followed, a nested loop counted
once), which leaves out what clang laid out of line, such as attention's masked-key blocks.

Exits 1 when an offered tile or attention kernel of a matrix-core target has no loop holding matrix instructions,
or when a card's peak disagrees with AMD's per-instruction cycle counts.

  tools/rocm/amd_matrix_peak.py BUILD_DIR_OR_ASM_DIR [--out FILE]
"""
import argparse
import glob
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amd_kernel_report import assembly_files, demangle, parse_assembly, short  # noqa: E402

URL = {
    "specs": "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html",
    "mi250": "https://rocm.docs.amd.com/en/docs-7.14.0/_sources/reference/gpu-arch/mi250.md",
    "mi300": "https://rocm.docs.amd.com/en/docs-6.2.2/conceptual/gpu-arch/mi300.html",
    "labnotes": "https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-readme/",
    "cdna3": "https://rocm.blogs.amd.com/software-tools-optimization/matrix-cores-cdna/README.html",
    "rdna3": "https://gpuopen.com/learn/wmma_on_rdna3/",
    "rdna4": "https://gpuopen.com/learn/using_matrix_core_amd_rdna4/",
    "calc": "https://github.com/ROCm/amd_matrix_instruction_calculator (matrix_calculator.py: cycles, coexec)",
    "rdnawp": "https://www.amd.com/system/files/documents/rdna-whitepaper.pdf (read as quoted; 2 SIMD32/CU agrees with "
              "[rdna3]'s 512 FLOPs/clock/CU at [calc]'s 32 cycles)",
    "snop": "https://github.com/llvm/llvm-project/pull/158990 (SIInstrInfo::insertNoops: s_nop N = N+1 wait states)",
    "mi250x": "https://zexron.com/amd-mi250-x-aldebaran-as-mcm-with-up-to-479-teraflop-s-and-560-watt-tdp (third party)",
    "rx7900": "https://guru3d.com/review/xfx-radeon-rx-7900-xtx-magair-review/page-4 (third party)",
    "rx7800": "https://www.sportskeeda.com/gaming-tech/news-amd-radeon-rx-7800-xt-specs-prices-performance (third party)",
    "rx9070": "https://multiplayer.it/notizie/amd-radeon-rx-9070-xt-rx-9070-specifiche.html (third party)",
    "rx9060": "https://www.tweaktown.com/news/105296/amd-confirms-radeon-rx-9060-xt-8gb-and-16gb-models-coming/index.html (third party)",
}
# One card per target. peak: AMD's dense f16 matrix TFLOPs (None: not found on an AMD page); clock: peak/boost MHz;
# rate: AMD's f16 matrix FLOPs/clock/CU; cycles, delay: AMD's calculator for 16x16x16 f16/bf16 (delay: cycles after
# an MFMA before a co-executing VALU op may issue; None: WMMA does not co-execute). CUs and LDS: [specs].
CHIPS = {
    "gfx90a": dict(card="MI250X", cdna=True, simds=4, lds_kib=64, cus=220, clock=1700, peak=None, rate=1024, cycles=32,
                   delay=4, src="1.7 GHz [mi250]; 1024 FLOPs/clock/CU [labnotes]; 383.0 TFLOPs found only in a "
                   "third-party copy of AMD's table [mi250x] (AMD's page: 362.1 for the 208-CU MI250 at 1.7 GHz [mi250])"),
    "gfx942": dict(card="MI300X", cdna=True, simds=4, lds_kib=64, cus=304, clock=2100, peak=1307.4, rate=2048,
                   cycles=16, delay=4, src="1307.4 TFLOPs, 2048 FLOPs/clock/CU [mi300]; 2100 MHz [cdna3]"),
    "gfx1100": dict(card="RX 7900 XTX", cdna=False, simds=2, lds_kib=128, cus=96, clock=2500, peak=None, rate=512,
                    cycles=32, delay=None, src="512 FLOPs/clock/CU [rdna3]; 2.5 GHz third-party [rx7900]; peak "
                    "TFLOPs: not found on an AMD page"),
    "gfx1101": dict(card="RX 7800 XT", cdna=False, simds=2, lds_kib=128, cus=60, clock=2430, peak=None, rate=512,
                    cycles=32, delay=None, src="2430 MHz third-party [rx7800]; peak TFLOPs not found: the RDNA3 CU "
                    "rate [rdna3] assumed (same CU design and ISA as gfx1100 [calc])"),
    "gfx1200": dict(card="RX 9060 XT", cdna=False, simds=2, lds_kib=128, cus=32, clock=3130, peak=None, rate=1024,
                    cycles=16, delay=None, src="3130 MHz third-party [rx9060]; peak TFLOPs not found: the RDNA4 CU "
                    "rate [rdna4] assumed (same CU design and ISA as gfx1201 [calc])"),
    "gfx1201": dict(card="RX 9070 XT", cdna=False, simds=2, lds_kib=128, cus=64, clock=2970, peak=None, rate=1024,
                    cycles=16, delay=None, src="1024 FLOPs/clock/CU [rdna4]; 2970 MHz third-party [rx9070]; peak "
                    "TFLOPs: not found on an AMD page"),
}
MATRIX = ("v_mfma", "v_wmma", "v_smfmac")
TRANSCENDENTAL = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
HINTS = ("s_delay_alu", "s_clause", "s_set_inst_prefetch_distance")  # scheduling hints: assumed to take no issue slot
# Instructions worth a note when a main loop holds at least this many (MODEL says what each points at); one
# s_cbranch_vccz is a loop's own exit test.
SUSPECT = {"v_mul_hi_u32": 1, "s_and_saveexec_b32": 1, "s_and_saveexec_b64": 1, "ds_read_u16": 1, "ds_load_u16": 1,
           "v_ldexp_f32": 1, "v_bfe_u32": 1, "buffer_gl0_inv": 1, "global_inv": 1, "s_cbranch_vccz": 2}

MODEL = """## Model

Per iteration of one wave's main loop (found as the script's docstring says):

- **Matrix cycles** M = Σ 2·M·N·K of its matrix instructions ÷ the SIMD's dense f16 matrix FLOPs/clock = peak ÷ (CUs ×
  peak clock) ÷ SIMDs per CU (4 on CDNA [mi250], 2 SIMD32 on RDNA [rdnawp]), or AMD's FLOPs/clock/CU ÷ SIMDs where
  AMD's peak was not found. Checked against AMD's matrix instruction calculator [calc]: 16x16x16 f16/bf16 takes 32
  cycles on CDNA2, 16 on CDNA3, 32 on RDNA3 ("a single WMMA instruction coordinates 32 clocks" [rdna3]), 16 on
  RDNA4; bf16 runs at the f16 rate on all six [labnotes, mi300, rdna4, calc].
- **RDNA3, RDNA4**: WMMA executes on the SIMD's own VALU ("can co-execute with VALU: False" [calc]): every other
  instruction takes issue cycles from it. Bound = M / (M + VALU + LDS + memory + scalar + waits + s_nop wait
  states), a wave32 VALU op 1 cycle on a SIMD32 [rdnawp], any other instruction 1.
- **CDNA2, CDNA3**: MFMA runs beside the VALU ("can co-execute with VALU: True"), but a co-executing VALU op may
  issue only 4 cycles after the MFMA [calc], so each MFMA is charged 4 issue cycles too (a correction to "the
  non-matrix instructions only"). A wave64 VALU op takes 4 cycles on a 16-lane SIMD [mi250], any other 1. With ≥ 2
  waves per SIMD, other waves fill the issue slots (an s_nop stalls only its own wave): bound = min(1, M / (4·MFMAs
  + 4·VALU + LDS + memory + scalar + waits + s_nops)). With 1 wave: bound = M / (M + 4·VALU + LDS + memory + scalar
  + waits + s_nop wait states), the pessimistic end (the wave's own independent work may still co-execute).
- **Waves per SIMD** = min(clang's register occupancy, LDS): workgroups per CU (CDNA, 64 KiB) or per WGP (RDNA in
  its default WGP mode, 128 KiB [specs]) × waves per workgroup ÷ the SIMDs sharing that LDS; the dynamic LDS from
  gemm_tiles.cuh's shared_bytes and attention_amd.cuh's launch.

Assumptions: every instruction issues at the cost above; transcendentals (counted apart), 64-bit and packed VALU
ops cost like any VALU op; `s_delay_alu`, `s_clause`, `s_set_inst_prefetch_distance` are hints taking no issue slot
(at 1 cycle each they would lower RDNA bounds by up to HINT_DELTA points); `s_nop N` is N + 1 wait states [snop].
**A bound from the instruction mix only**: no memory or LDS bandwidth, no latency (matrix result latency, the
`s_waitcnt` after each load), no dependency stalls, no bank conflicts. Real kernels reach less.

Notes column, instructions pointing at fixable code: `v_mul_hi_u32` (division by a runtime value: one per
quotient through FastDivisor, about three per quotient from a general division); `s_and_saveexec` (exec-mask
branches, e.g. bf16 rounding's NaN test); `ds_read_u16`/`ds_load_u16` (16-bit shared-memory reads, as attention's
Vᵀ was read before it was stored transposed); `v_ldexp_f32` (exp2f's denormal fix-up around each `v_exp_f32`); `v_bfe_u32` (software f32 →
bf16 rounding); `buffer_gl0_inv`/`global_inv` (an L0 invalidate at each __syncthreads in WGP mode); `s_cbranch_vccz`
(scalar branches inside the loop, as attention's mask test per score was before it was decided per tile).

Sources:"""


def per_simd_rate(chip):
    """Dense f16 matrix FLOPs per clock per SIMD: the peak / (CUs x clock) / SIMDs, checked against AMD's per-CU rate;
    AMD's per-CU rate / SIMDs where the card's peak was not found."""
    if chip["peak"]:
        per_cu = chip["peak"] * 1e12 / (chip["cus"] * chip["clock"] * 1e6)
        if abs(per_cu / chip["rate"] - 1) > 0.01:
            sys.exit(f"{chip['card']}: peak/(CUs x clock) = {per_cu:.0f} FLOPs/clock/CU, AMD says {chip['rate']}")
    return chip["rate"] / chip["simds"]


def input_files(path):
    """{(source, target): .s path} from a build dir (compile_commands.json) or a directory of copies."""
    if os.path.exists(os.path.join(path, "compile_commands.json")):
        return assembly_files(path)
    found = {}
    for f in glob.glob(os.path.join(path, "*-hip-amdgcn-amd-amdhsa-gfx*.s")):
        stem, target = re.match(r"(.*)-hip-amdgcn-amd-amdhsa-(gfx\w+)\.s$", os.path.basename(f)).groups()
        found[(stem + ".cu", target)] = f
    return found


def functions(text):
    """{symbol: raw lines up to .Lfunc_end}, labels and clang's comments kept (parse_assembly drops them)."""
    funcs, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][\w.$]*):", line)
        if m:
            current = funcs.setdefault(m.group(1), [])
        elif line.startswith(".Lfunc_end"):
            current = None
        elif current is not None:
            current.append(line)
    return funcs


def parse_body(lines):
    """The instructions (token lists), {label: index of its first instruction} and {label: clang's loop header},
    read from the comments on and under each label, which may wrap to the next line."""
    instrs, labels, loop_of, pending = [], {}, {}, None
    for line in lines:
        s = line.strip()
        m = re.match(r"^\.L(BB\w+):", s)
        if m:
            pending = m.group(1)
            labels[".L" + pending] = len(instrs)
        elif s.startswith("; %bb") or not s.startswith(";"):
            pending = None
        if pending and ".L" + pending not in loop_of:
            header = re.search(r"in Loop: Header=(BB\w+)", s)
            if header or "Loop Header" in s:
                loop_of[".L" + pending] = header.group(1) if header else pending
        if s and not s.startswith((";", ".")):
            instrs.append(s.split(";")[0].split())
    return instrs, labels, loop_of


def loops(instrs, labels, loop_of):
    """{loop: (first index, last index)}: the targets of backward branches, grouped by clang's loop header."""
    spans = {}
    for i, ins in enumerate(instrs):
        if ins[0].startswith(("s_branch", "s_cbranch")) and labels.get(ins[-1], i + 1) <= i:
            key, start = loop_of.get(ins[-1], ins[-1]), labels[ins[-1]]
            first, _ = spans.get(key, (start, i))
            spans[key] = (min(first, start), i)
    return list(spans.values())


def matrix_count(instrs, span):
    return sum(instrs[i][0].startswith(MATRIX) for i in range(span[0], span[1] + 1))


def main_loop(instrs, spans):
    """The innermost loop holding matrix instructions (the one holding most, if several), and the outermost loops
    nested in it; None when no loop holds a matrix instruction."""
    inside = lambda a, b: a != b and b[0] <= a[0] and a[1] <= b[1]  # noqa: E731  (a within b)
    holding = [sp for sp in spans if matrix_count(instrs, sp)]
    inner = [a for a in holding if not any(inside(b, a) for b in holding)]
    if not inner:
        return None
    best = max(inner, key=lambda sp: matrix_count(instrs, sp))
    nested = [sp for sp in spans if inside(sp, best)]
    return best, [a for a in nested if not any(inside(a, b) for b in nested)]


def fall_through(instrs, labels, loop, nested):
    """Indices of one iteration along the fall-through path, each nested loop's body once."""
    (start, end), path, pos = loop, [], loop[0]
    while start <= pos <= end and pos not in path:
        within = [sp for sp in nested if sp[0] <= pos <= sp[1]]
        if within:
            path += range(within[0][0], within[0][1] + 1)
            pos = within[0][1] + 1
        elif instrs[pos][0] == "s_branch":
            path.append(pos)
            if labels[instrs[pos][-1]] <= pos:
                break  # a latch: the iteration is over
            pos = labels[instrs[pos][-1]]
        else:
            path.append(pos)
            pos += 1
    return path


def tally(instrs, indices):
    """Counts by kind over the given instructions, and the matrix instructions by mnemonic."""
    c, matrix = Counter(), Counter()
    for i in indices:
        op = instrs[i][0]
        kind = ("matrix" if op.startswith(MATRIX) else "valu" if op.startswith("v_") else "lds" if op.startswith("ds_")
                else "mem" if op.startswith(("global_", "buffer_", "flat_", "scratch_")) else "nop" if op == "s_nop"
                else "wait" if op.startswith(("s_waitcnt", "s_wait_")) else "hint" if op.startswith(HINTS)
                else "scalar" if op.startswith("s_") else None)
        if kind is None:
            sys.exit(f"unclassified instruction in a main loop: {' '.join(instrs[i])}")
        c[kind] += 1
        c["trans"] += op.startswith(TRANSCENDENTAL)
        c["nop_states"] += int(instrs[i][1], 0) + 1 if kind == "nop" else 0
        matrix[op] += kind == "matrix"
        if op in SUSPECT:
            c["note " + op] += 1
    return c, +matrix


TILE_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "ops", "gpu",
                          "gemm_tile_shape.h")
TILE_DEFAULTS = dict(step_k=32, splits=1, vector="true", pipelined="false")


def tile_shapes():
    """{tile name: its fields} from gemm_tile_shape.h's instance table, the one place the shapes are written."""
    text, shapes = open(TILE_TABLE).read(), {}
    for m in re.finditer(r"struct (\w+) \{\s*static constexpr TileShape shape\{([^}]*)\};", text):
        fields = dict(TILE_DEFAULTS)
        for f in re.finditer(r"\.(\w+) = (\w+)", m.group(2)):
            fields[f.group(1)] = f.group(2)
        shapes[m.group(1)] = {k: v if v in ("true", "false") else int(v) for k, v in fields.items()}
    if not shapes:
        sys.exit(f"{TILE_TABLE}: no tile found (the table's form changed?)")
    return shapes


def tile(name, shapes=None):
    """(kind, offered name, dtype, dynamic LDS bytes, threads) from a demangled kernel name; the LDS formulas are
    gemm_tile_shape.h's shared_bytes and attention_amd.cuh's launch (keep in step with them)."""
    m = re.search(r"gemm_kernel<(\w+), (?:gemm_tiles::)?tiles::((?:SplitK|Gated)<(?:gemm_tiles::)?tiles::)?(\w+)"
                  r"(?:, (\d+))?>?, (\w+)<", name)
    if m:
        dtype, wrapper, tile_type, layout = m.group(1), m.group(2) or "", m.group(3), m.group(5)
        split, gated = wrapper.startswith("SplitK"), wrapper.startswith("Gated")
        shapes = shapes or tile_shapes()
        if tile_type not in shapes:
            sys.exit(f"{name}: tile {tile_type} is not in {TILE_TABLE}")
        t = shapes[tile_type]
        lanes = 64 if layout == "Fragments16x16" else 32
        label = ("gather" if t["vector"] == "false" else "mma") + f"{t['bm']}x{t['bn']}"
        label += ("w8" if t["wm"] * t["wn"] == 8 else "") + ("-split4/-split8" if split else "")
        label += "-geglu" if gated else ""
        lds = t["stages"] * (t["bm"] + t["bn"]) * (t["step_k"] + 8) * 2
        return "GEMM", label, dtype, lds, t["wm"] * t["wn"] * lanes
    m = re.search(r"flash_attention_kernel<(\w+)<.*>, (\w+), (\d+), (\d+), (\d+)>", name)
    if m:
        d, keys, groups = map(int, m.group(3, 4, 5))
        lanes = 64 if m.group(1) == "Fragments16x16" else 32
        lds = ((16 * groups + keys) * (d + 8) + d * (keys + 8)) * 2  # Q and K in rows, Vᵀ in columns
        return "attention", f"flash d{d}, {keys} keys", m.group(2), lds, groups * lanes
    return None


def bound(chip, c, matrix, waves):
    """(matrix cycles, cycles of the rest, bound) per iteration of one wave: MODEL."""
    rate, flops = per_simd_rate(chip), 0
    for op, n in matrix.items():
        mnk = re.search(r"(\d+)x(\d+)x(\d+)", op)
        if not mnk or re.search(r"_\d+b(_|$)", op):
            sys.exit(f"{op}: not a single-block MxNxK matrix instruction; the model has no rate for it")
        one = 2 * int(mnk[1]) * int(mnk[2]) * int(mnk[3])
        if one / rate != chip["cycles"]:
            sys.exit(f"{chip['card']} {op}: {one / rate:g} cycles from the peak, {chip['cycles']} by AMD's calculator")
        flops += one * n
    m, others = flops / rate, c["lds"] + c["mem"] + c["scalar"] + c["wait"]
    if not chip["cdna"]:  # WMMA runs on the SIMD's VALU: everything else takes its issue cycles
        rest = c["valu"] + others + c["nop_states"]
        return m, rest, m / (m + rest)
    if waves >= 2:  # the matrix core runs beside the VALU; other waves fill the issue slots
        rest = chip["delay"] * sum(matrix.values()) + 4 * c["valu"] + others + c["nop"]
        return m, rest, min(1.0, m / rest)
    rest = 4 * c["valu"] + others + c["nop_states"]
    return m, rest, m / (m + rest)


def analyse(target, chip, kernels, bodies, readable, symbol, lines):
    """One table row for an offered kernel; None for what is not a tile or attention kernel, or a trap stub (an
    instance the target does not offer); the string of a problem when no loop holds a matrix instruction."""
    info = tile(short(readable.get(symbol, symbol)))
    if not info or symbol not in kernels or bodies.get(symbol, ["s_trap"])[0].startswith("s_trap"):
        return None
    kind, label, dtype, lds, threads = info
    instrs, labels, loop_of = parse_body(lines)
    found = main_loop(instrs, loops(instrs, labels, loop_of))
    if not found:
        return f"{target}: {label} {dtype}: no loop holds a matrix instruction"
    (loop, nested), wave = found, 64 if chip["cdna"] else 32
    c, matrix = tally(instrs, fall_through(instrs, labels, loop, nested))
    whole, whole_matrix = tally(instrs, range(loop[0], loop[1] + 1))
    occ = int(kernels[symbol].get("occupancy", "1"))
    sharing = chip["simds"] * (1 if chip["cdna"] else 2)  # RDNA's LDS belongs to a WGP: two CUs' SIMDs
    lds_occ = (chip["lds_kib"] * 1024 // lds) * (threads // wave) // sharing
    waves = min(occ, lds_occ)
    m, rest, b = bound(chip, c, matrix, waves)
    whole_bound = bound(chip, whole, whole_matrix, waves)[2]
    return dict(target=target, kind=kind, label=label, dtype=dtype, c=c, matrix=matrix, m=m, rest=rest, bound=b,
                occ=occ, lds_occ=lds_occ, waves=waves, whole=(loop[1] - loop[0] + 1, whole_bound))


def pct(x):
    return f"{int(100 * x + 1e-9)}%"  # rounded down: a bound should not round up to 100%


def cells(r):
    c = r["c"]
    notes = ", ".join(f"`{k[5:]}`×{n}" for k, n in sorted(c.items()) if k.startswith("note ") and n >= SUSPECT[k[5:]])
    hints = f"hints ×{c['hint']}" if c["hint"] else ""
    return [r["label"], r["dtype"], ", ".join(f"`{op}` ×{n}" for op, n in sorted(r["matrix"].items())),
            f"{c['valu']}" + (f" ({c['trans']} transc.)" if c["trans"] else ""), str(c["lds"]), str(c["mem"]),
            str(c["scalar"]), f"{c['wait']} / {c['nop']} ({c['nop_states']})",
            f"{r['occ']} / {r['lds_occ']} → {r['waves']}", f"{r['m']:.0f}", f"{r['rest']:.0f}",
            f"**{pct(r['bound'])}**", f"{r['whole'][0]} instr, {pct(r['whole'][1])}",
            "; ".join(x for x in (notes, hints) if x)]


def summary(target, chip, rows):
    """Best and worst offered kernel of each kind, with the largest of the worst one's non-matrix costs."""
    def say(r):
        c, k = r["c"], 4 if chip["cdna"] else 1
        costs = {"VALU": k * c["valu"], "LDS": c["lds"], "memory": c["mem"], "scalar": c["scalar"],
                 "waits": c["wait"], "s_nop": c["nop_states"]}
        top = max(costs, key=costs.get)
        dtypes = sorted({x["dtype"] for x in rows if x["target"] == target and x["label"] == r["label"]
                         and pct(x["bound"]) == pct(r["bound"])}, key=len)  # "f16/bf16" where both give the same
        return f"{r['label']} {'/'.join(dtypes)} {pct(r['bound'])} ({top} {pct(costs[top] / sum(costs.values()))} " \
               "of the rest)"
    parts = []
    for kind in ("GEMM", "attention"):
        rs = sorted((r for r in rows if r["target"] == target and r["kind"] == kind), key=lambda r: r["bound"])
        text = f"{kind} best {say(rs[-1])}, worst {say(rs[0])}"
        if rs[0]["label"] == "gather64x64":  # the few-channel first convolution only: name the worst mma tile too
            text += ", worst mma tile " + say(next(r for r in rs if r["label"] != "gather64x64"))
        parts.append(text)
    return f"- **{target}** ({chip['card']}): " + "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", help="a hip build dir, or a directory of *-hip-amdgcn-amd-amdhsa-gfx*.s files")
    parser.add_argument("--out", help="write the Markdown here")
    opts = parser.parse_args()
    files, problems, rows = input_files(opts.path), [], []
    for target, chip in CHIPS.items():
        layout = "mfma" if chip["cdna"] else "wmma11" if target.startswith("gfx11") else "wmma12"
        for source in (f"gemm_tiles_{layout}.cu", f"attention_amd_{layout}.cu"):
            if (source, target) not in files:
                problems.append(f"{target}: no assembly of {source} under {opts.path}")
                continue
            with open(files[(source, target)]) as f:
                text = f.read()
            kernels, bodies = parse_assembly(text)
            readable = demangle(sorted(kernels))
            found = [analyse(target, chip, kernels, bodies, readable, s, lines) for s, lines in functions(text).items()]
            problems += [r for r in found if isinstance(r, str)]
            rows += [r for r in found if isinstance(r, dict)]
            if not any(isinstance(r, dict) for r in found):
                problems.append(f"{target}: no offered kernel with a matrix loop in {source}")
    if problems:
        print(f"AMD matrix peak: {len(problems)} problem(s):\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    lines = ["# AMD matrix peak: what each tile's instruction mix allows", "",
             "Made by `tools/rocm/amd_matrix_peak.py` from the device assembly of the `hip` preset "
             "(`-DHD_HIP_SAVE_ASSEMBLY=ON`). Compiled, never run: **an upper bound from the main loop's instruction "
             "mix only, not a measurement** (no memory bandwidth, latency or bank conflicts). Per target: the offered "
             "GEMM tiles (gemm_tiles.cuh's candidates_of) and flash attention kernels (attention_amd.cuh) of the "
             "target's matrix layout; the portable tiles, which a test can force, hold no matrix instructions.", "",
             "## Summary", ""] + [summary(t, chip, rows) for t, chip in CHIPS.items()]
    # What counting the RDNA scheduling hints at one issue cycle each would cost the bounds, for MODEL's caveat.
    delta = max(r["bound"] - r["m"] / (r["m"] + r["rest"] + r["c"]["hint"]) for r in rows if not CHIPS[r["target"]]["cdna"])
    lines += ["", MODEL.replace("HINT_DELTA", f"{100 * delta:.0f}"), ""] + [f"- [{k}] {u}" for k, u in URL.items()]
    lines += ["", "## The cards", "",
              "| target | card | CUs | clock MHz | f16 FLOPs/clock/SIMD | 16x16x16 cycles | sources |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {t} | {c['card']} | {c['cus']} | {c['clock']} | {per_simd_rate(c):.0f} | {c['cycles']} | CUs, LDS "
              f"[specs]; {c['src']} |" for t, c in CHIPS.items()]
    for target, chip in CHIPS.items():
        lines += ["", f"## {target} ({chip['card']})", "",
                  "Per iteration of one wave along the fall-through path. `whole body`: the loop's instructions, each "
                  "once, and the bound they give. waves/SIMD: registers / LDS → used.", "",
                  "| tile | dtype | matrix / iteration | VALU | LDS | memory | scalar | waits / s_nop (states) | "
                  "waves/SIMD | matrix cycles | other cycles | bound | whole body | notes |", "|" + " --- |" * 14]
        lines += ["| " + " | ".join(cells(r)) + " |" for r in rows if r["target"] == target]
    text = "\n".join(lines) + "\n"
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
