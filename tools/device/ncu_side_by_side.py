#!/usr/bin/env python3
"""Nsight Compute's section metrics of two kernels side by side, from `ncu --csv --page details` output:
for each LABEL=PATTERN (a regular expression), the last profiled launch of a kernel whose name matches
it, one row a metric.

    python3 tools/device/ncu_side_by_side.py DETAILS.csv LABEL_A=PATTERN_A LABEL_B=PATTERN_B
"""
import csv
import re
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path = sys.argv[1]
    labels, patterns = zip(*(argument.split("=", 1) for argument in sys.argv[2:]))
    launches = [{} for _ in patterns]  # per pattern: launch id -> {(section, metric): (value, unit)}
    order = []  # (section, metric) in the order ncu prints them
    with open(path, errors="replace") as f:
        rows = [row for row in csv.reader(f) if len(row) > 10]
    head = rows[0]
    at = {name: head.index(name) for name in ("ID", "Kernel Name", "Section Name", "Metric Name",
                                              "Metric Unit", "Metric Value")}
    for row in rows[1:]:
        for i, pattern in enumerate(patterns):
            if re.search(pattern, row[at["Kernel Name"]]):
                key = (row[at["Section Name"]], row[at["Metric Name"]])
                if key not in order:
                    order.append(key)
                launches[i].setdefault(row[at["ID"]], {})[key] = (row[at["Metric Value"]], row[at["Metric Unit"]])
    for i, pattern in enumerate(patterns):
        if not launches[i]:
            sys.exit(f"no launch of a kernel matching {pattern!r} in {path}")
    last = [launches[i][max(launches[i], key=int)] for i in range(len(patterns))]
    print(f"| section | metric | unit | {' | '.join(labels)} |")
    print("| --- | --- | --- |" + " --- |" * len(patterns))
    for key in order:
        cells = [m.get(key, ("-", ""))[0] for m in last]
        unit = next((m[key][1] for m in last if key in m), "")
        print(f"| {key[0]} | {key[1]} | {unit} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
