"""Draw a machine's hierarchical roofline: one diagonal per memory level, one flat roof per precision."""

from __future__ import annotations

from pathlib import Path

from pytest_roofline.model import Machine


def plot_machine(machine: Machine, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    peaks = dict(sorted(machine.peak_flops.items(), key=lambda kv: -kv[1]))
    bandwidths = dict(sorted(machine.bandwidth.items(), key=lambda kv: -kv[1]))
    top = max(peaks.values(), default=max(bandwidths.values()))
    low_ai = 1 / 64
    high_ai = max(256.0, 4 * top / min(bandwidths.values(), default=top))
    figure, axes = plt.subplots(figsize=(8, 5.5))
    for level, bandwidth in bandwidths.items():
        ridge = top / bandwidth
        axes.plot([low_ai, ridge], [bandwidth * low_ai, top], lw=1.5)
        axes.annotate(f"{level} {bandwidth / 1e9:.1f} GB/s", xy=(low_ai * 1.3, bandwidth * low_ai * 1.3),
                      rotation=0, fontsize=8)
    for precision, peak in peaks.items():
        start = peak / max(bandwidths.values()) if bandwidths else low_ai
        axes.hlines(peak, start, high_ai, linestyles="--", lw=1.2)
        axes.annotate(f"{precision} {peak / 1e9:.1f} GFLOP/s", xy=(high_ai / 1.05, peak * 1.05),
                      ha="right", fontsize=8)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("performance (FLOP/s)")
    axes.set_title(machine.name, fontsize=10)
    axes.grid(True, which="both", alpha=0.25)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(target, dpi=120)
    plt.close(figure)
    return target
