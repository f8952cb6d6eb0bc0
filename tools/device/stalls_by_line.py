#!/usr/bin/env python3
"""Sampled warp stalls of one kernel by CUDA source line, from Nsight Compute's source page.

On the device machine, with the kernel built with -lineinfo (cmake ... -DCMAKE_CUDA_FLAGS=-lineinfo):
  ncu --section SourceCounters --section WarpStateStats -k regex:NAME --launch-skip 3 --launch-count 1 \\
      -o /tmp/prof BINARY ARGS
  ncu --import /tmp/prof.ncu-rep --page source --csv --print-source cuda,sass > /tmp/source.csv
  python3 tools/device/stalls_by_line.py /tmp/source.csv [LINES]
prints the LINES (default 30) most sampled lines, each with its share of all samples and its three largest
stall reasons. Inlined functions' lines (wgmma.cuh's waits, say) count apart from their callers'.
"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(',', ''))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = []
    path, head = None, None
    with open(sys.argv[1], errors='replace') as f:
        for row in csv.reader(f):
            if row and row[0] == 'File Path':  # each source file's table starts with its path
                path = row[1]
            elif row and row[0] == 'Line No':  # the table's header: where the samples and the reasons are
                head = row
                total_at = head.index('Warp Stall Sampling (All Samples)')
                reasons_at = [(i, name[len('stall_'):]) for i, name in enumerate(head)
                              if name.startswith('stall_') and 'Not Issued' not in name]
            elif head and len(row) == len(head) and row[0].strip():  # a source line (SASS rows have no number)
                reasons = sorted(((number(row[i]), name) for i, name in reasons_at), reverse=True)
                lines.append((number(row[total_at]), f'{path.rsplit("/", 1)[-1]}:{row[0]}', row[1].strip(),
                              reasons[:3]))
    if not lines:
        sys.exit(f'{sys.argv[1]}: no source lines with samples (built without -lineinfo?)')
    all_samples = sum(line[0] for line in lines)
    print(f'warp stall samples: {all_samples:.0f}')
    for total, where, source, reasons in sorted(lines, reverse=True)[:int(sys.argv[2]) if len(sys.argv) > 2 else 30]:
        why = ' '.join(f'{name}={count:.0f}' for count, name in reasons)
        print(f'{total:8.0f} {100 * total / all_samples:5.1f}%  {where:34s} {source[:90]:90s} | {why}')


if __name__ == '__main__':
    main()
