#!/usr/bin/env python3
"""Draws BENCHMARKS.md's chart from the JSON that bench/compare_diffusers.py --json-out writes: time per
stage of a whole generation, the 1024x1024 VAE decode and the SDXL UNet step, hipDiffusion beside
diffusers, one bar per implementation, milliseconds on a log scale (the stages span three decades).

    python3 tools/plot_stages.py compare.json [more.json[:part,...] ...] docs/stages.png

Several reports are merged part by part (generation_ms, vae_1024, sdxl), a later file's part replacing an
earlier one's: e.g. a run with --compile for the generation and a run with SDXL. `file.json:vae_1024`
takes only the parts named from that file.

Needs matplotlib (PyPI); it runs anywhere, not only where the numbers were measured.
"""
import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"hipDiffusion": "#c0392b", "hipDiffusion, own kernels": "#e59866", "diffusers eager": "#7f8c8d",
           "diffusers + torch.compile": "#2c3e50"}


def panels(report):
    """(title, {stage: {implementation: ms}}) for each part of the report that is there."""
    out = []
    gen = report.get("generation_ms")
    if gen:
        stages = list(gen["hipDiffusion"])
        out.append((f"{report['arch']} 512x512, {report['steps']} Euler steps, CFG 7.5",
                    {s: {impl: t[s] for impl, t in gen.items() if t.get(s) is not None and not math.isnan(t[s])}
                     for s in stages}))
    vae = report.get("vae_1024")
    if vae:
        pairs = {"whole": ("hipDiffusion, whole", "diffusers, whole"),
                 "tiled (ours: exact tiles)": ("hipDiffusion, --vae-tiling", "diffusers, enable_tiling")}
        rows = {k: {"hipDiffusion": vae[a]["ms"], "diffusers eager": vae[b]["ms"]} for k, (a, b) in pairs.items()}
        out.append(("VAE decode 1024x1024 (to host)", rows))
    xl = report.get("sdxl")
    if xl:
        out.append(("SDXL, 128x128 latent",
                    {"UNet step (batch 2)": {"hipDiffusion": xl["unet_step_ms"]["hipDiffusion graph"],
                                             "diffusers eager": xl["unet_step_ms"]["diffusers eager"]},
                     "VAE decode 1024x1024": {"hipDiffusion": xl["vae_decode_ms"]["hipDiffusion"],
                                              "diffusers eager": xl["vae_decode_ms"]["diffusers eager"]}}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+", help="compare_diffusers.py --json-out outputs")
    parser.add_argument("png")
    args = parser.parse_args()
    report = {}
    for spec in args.reports:
        path, _, names = spec.partition(":")
        with open(path) as f:
            part = json.load(f)
        if names:
            missing = [n for n in names.split(",") if n not in part]
            if missing:
                raise SystemExit(f"{path}: no part {', '.join(missing)} in it")
            part = {k: v for k, v in part.items() if k in names.split(",") or k in ("device", "date", "torch")}
        if report and (part["device"], part["date"]) != (report["device"], report["date"]):
            raise SystemExit(f"{path}: measured on {part['device']} on {part['date']}, not as {args.reports[0]}")
        report.update(part)
    parts = panels(report)
    if not parts:
        raise SystemExit(f"{' '.join(args.reports)}: no generation, VAE or SDXL numbers in them")
    heights = [len(stages) for _, stages in parts]
    # One x range for every panel, from 1 ms: bars of different panels compare by length.
    longest = max(ms for _, stages in parts for times in stages.values() for ms in times.values())
    fig, axes = plt.subplots(len(parts), 1, figsize=(9, 1.4 + 0.75 * sum(heights)), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (title, stages) in zip(axes[:, 0], parts):
        impls = [i for i in COLOURS if any(i in t for t in stages.values())]
        bar = 0.8 / len(impls)
        for k, impl in enumerate(impls):
            ys, xs = [], []
            for row, times in enumerate(stages.values()):
                if impl in times:
                    ys.append(row + (k - (len(impls) - 1) / 2) * bar)
                    xs.append(times[impl])
            ax.barh(ys, xs, height=bar, color=COLOURS[impl], label=impl)
            for y, x in zip(ys, xs):
                ax.text(x * 1.05, y, f"{x:.1f}" if x < 100 else f"{x:.0f}", va="center", fontsize=7)
        ax.set_yticks(range(len(stages)), list(stages))
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(1, longest * 3)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", which="both", alpha=0.2)
    shown = [i for i in COLOURS if any(i in times for _, stages in parts for times in stages.values())]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[i]) for i in shown]
    fig.legend(handles, shown, loc="upper center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, 0.955))
    axes[-1, 0].set_xlabel("milliseconds (log scale; shorter is faster)")
    fig.suptitle(f"hipDiffusion and diffusers on one {report['device']}, {report['date']} (torch {report['torch']})",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
