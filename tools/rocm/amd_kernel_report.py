#!/usr/bin/env python3
"""The AMD kernels' resource gate: what each kernel costs on each target, from the compiler itself.

Reads the device assembly that a `hip` build configured with -DHD_HIP_SAVE_ASSEMBLY=ON leaves beside
its objects (clang's -save-temps=obj: one .s per source and AMD target) and reports per kernel: VGPRs,
AGPRs, SGPRs, scratch bytes per lane, register spills, static LDS bytes (from the code object's
metadata), occupancy in waves per SIMD (clang's kernel-info comment), and its matrix instructions
(v_mfma_*, v_wmma_*).

Kernels whose code begins with a trap are instances a target does not offer (a layout its hardware
lacks, a head size it cannot hold: mma.cuh, gemm_tiles.cuh, attention_amd.cuh); they are counted apart.

Fails (exit 1) when any offered kernel spills a register, uses scratch memory or a dynamic stack, or
when a target with matrix cores holds none of its matrix instructions in the GEMM or attention kernels.
Prints the tables as Markdown (docs/amd-kernel-resources.md keeps them) and writes them to --out.

  tools/rocm/amd_kernel_report.py BUILD_DIR [--out FILE]
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

# Kernel files whose matrix-core kernels must hold the target's matrix instructions, and the
# instructions each target family uses (AMD's ISA manuals; the research notes list what clang 22 emits).
MATRIX_INSTRUCTIONS = {
    "gfx90a": "v_mfma_", "gfx942": "v_mfma_", "gfx950": "v_mfma_",
    "gfx1100": "v_wmma_", "gfx1101": "v_wmma_", "gfx1102": "v_wmma_",
    "gfx1200": "v_wmma_", "gfx1201": "v_wmma_",
}
# The kernel files whose kernels must hold their target's matrix instructions (gfx1030 has none).
def required_matrix_files(target):
    layout = "mfma" if MATRIX_INSTRUCTIONS[target] == "v_mfma_" else "wmma11" if target.startswith("gfx11") else "wmma12"
    return (f"gemm_tiles_{layout}.cu", f"attention_amd_{layout}.cu")

def parse_assembly(text):
    """Per kernel of one target's assembly: its resources (from the code object's metadata and clang's
    kernel-info comments) and its instructions."""
    kernels, bodies, occupancy = {}, {}, {}
    current, body, in_metadata, entry = None, None, False, None
    for line in text.splitlines():
        if in_metadata:
            if line.strip().startswith(".end_amdgpu_metadata"):
                in_metadata = False
                continue
            m = re.match(r"^  - \.(\w+):\s*(.*)$", line) or re.match(r"^    \.(\w+):\s*(.*)$", line)
            if m and line.startswith("  - "):
                entry = {}
            if m and entry is not None:
                entry[m.group(1)] = m.group(2).strip().strip("'")
                if m.group(1) == "name":
                    kernels[entry["name"]] = entry
            continue
        if line.strip().startswith(".amdgpu_metadata"):
            in_metadata = True
            continue
        m = re.match(r"^([A-Za-z_][\w.$]*):\s*(;.*)?$", line)
        if m and not m.group(1).startswith("."):
            current, body = m.group(1), []
            bodies[current] = body
            continue
        if line.startswith(".Lfunc_end"):
            body = None
            continue
        m = re.match(r"^; Occupancy: (\d+)", line)
        if m and current:
            occupancy[current] = m.group(1)
            continue
        if body is not None:
            stripped = line.strip()
            if stripped and not stripped.startswith((";", ".")):
                body.append(stripped)
    for name, entry in kernels.items():
        entry["occupancy"] = occupancy.get(name, "?")
    return kernels, bodies


def assembly_files(build_dir):
    """{(source, target): path} for the device assembly that -save-temps=obj left beside the objects of
    the HIP sources the build tree compiles now (compile_commands.json), so that files of sources since
    removed are not read."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    found = {}
    for e in entries:
        args = shlex.split(e["command"])
        if "-x" not in args or args[args.index("-x") + 1] != "hip" or "-o" not in args:
            continue
        obj = os.path.join(e["directory"], args[args.index("-o") + 1])
        stem = os.path.basename(e["file"])[: -len(".cu")]
        targets = [a.split("=", 1)[1] for a in args if a.startswith("--offload-arch=")]
        for target in targets:
            path = os.path.join(os.path.dirname(obj), f"{stem}-hip-amdgcn-amd-amdhsa-{target}.s")
            if os.path.exists(path):
                found[(stem + ".cu", target)] = path
    return found


def demangle(names):
    if not names:
        return {}
    run = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return dict(zip(names, run.stdout.splitlines()))


def short(name):
    for old, new in (("hd::gpu::(anonymous namespace)::", ""), ("hd::gpu::", ""), ("__half", "f16"), ("Bf16", "bf16"),
                     ("(anonymous namespace)::", ""), ("hd::DType", "DType")):
        name = name.replace(old, new)
    name = re.sub(r"\(.*\)$", "", name)  # the parameter list: the template arguments say which instance
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--out", help="write the Markdown tables here")
    opts = parser.parse_args()

    files = assembly_files(opts.build_dir)
    if not files:
        sys.exit(f"{opts.build_dir}: no device assembly (*-hip-amdgcn-amd-amdhsa-gfx*.s): configure the hip "
                 "preset with -DHD_HIP_SAVE_ASSEMBLY=ON and build it first")
    targets = sorted({t for _, t in files}, key=lambda t: (len(t), t))
    results = {}
    for key, path in sorted(files.items()):
        with open(path) as f:
            results[key] = parse_assembly(f.read())

    readable = demangle(sorted({k for kernels, _ in results.values() for k in kernels}))
    problems, lines = [], []
    lines.append("# AMD kernels: registers, scratch and occupancy per target\n")
    lines.append("Made by `tools/rocm/amd_kernel_report.py` from the device assembly of the `hip` preset "
                 "(built with `-DHD_HIP_SAVE_ASSEMBLY=ON`: the code objects' metadata and clang's kernel-info "
                 "comments). CI fails on any spill or scratch use in an offered kernel. Compiled, never run: "
                 "there is no AMD GPU here. Occupancy: waves per SIMD the registers allow (LDS may allow "
                 "fewer). `matrix`: matrix instructions in the kernel's code.\n")
    for target in targets:
        rows, stubs, matrix_files, mnemonics = [], 0, set(), set()
        family = MATRIX_INSTRUCTIONS.get(target)
        for (source, t), (kernels, bodies) in sorted(results.items()):
            if t != target:
                continue
            for symbol, r in sorted(kernels.items(), key=lambda kv: readable.get(kv[0], kv[0])):
                body = bodies.get(symbol, [])
                if body and body[0].startswith("s_trap"):
                    stubs += 1
                    continue
                matrix_lines = [l.split()[0] for l in body if l.startswith(("v_mfma", "v_wmma"))]
                mnemonics.update(matrix_lines)
                if matrix_lines:
                    matrix_files.add(source)
                scratch = int(r.get("private_segment_fixed_size", "0"))
                spills = int(r.get("vgpr_spill_count", "0")) + int(r.get("sgpr_spill_count", "0"))
                dynamic = r.get("uses_dynamic_stack", "false") == "true"
                name = short(readable.get(symbol, symbol))
                if scratch or spills or dynamic:
                    problems.append(f"{target} {source}: {name}: scratch {scratch} B/lane, spills {spills}"
                                    f"{', dynamic stack' if dynamic else ''}")
                rows.append((source, name, r.get("vgpr_count", "?"), r.get("agpr_count", "-"),
                             r.get("sgpr_count", "?"), str(scratch), str(spills),
                             r.get("group_segment_fixed_size", "?"), r.get("occupancy", "?"),
                             str(len(matrix_lines))))
        if family:
            for f in required_matrix_files(target):
                if f not in matrix_files:
                    problems.append(f"{target}: no {family}* instruction in any kernel of {f}")
        lines.append(f"\n## {target}\n")
        lines.append(f"{len(rows)} kernels offered, {stubs} instances not offered on this target (trap stubs); "
                     f"matrix instructions ({', '.join(f'`{m}`' for m in sorted(mnemonics)) or 'none'}) in: "
                     f"{', '.join(sorted(matrix_files)) or 'none'}.\n")
        lines.append("| file | kernel | VGPRs | AGPRs | SGPRs | scratch B/lane | spills | static LDS B | occupancy | matrix |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for row in rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    text = "\n".join(lines) + "\n"
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    print(text)
    if problems:
        print(f"\nAMD resource gate: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"AMD resource gate: {len(targets)} targets, {len(files)} device files, no spills, no scratch; "
          "matrix instructions present where the target has them.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
