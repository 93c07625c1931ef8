"""The side-by-side table, its results files and the chart of history bytes by steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cost_report import cost_lines, travel_lines, waiting_lines

RESULTS_DIR = Path(__file__).parent / "results"
SIZE_COLUMNS = (10, 50, 100, 200)
COMPARE_AT = 200  # the run length where the issue sets the storage target
HISTORY_LIMIT = 50 * 1024 * 1024  # Temporal's default history size error limit


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any], folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "side-by-side.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    text = render(rows, meta)
    (folder / "side-by-side.md").write_text(text)
    return text


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The tables of what was measured; a phase left out (`--phases`) leaves its table out."""
    raw = next((r for r in rows if r["system"].startswith("raw") and "error" not in r), None)
    lines = [
        f"Side by side: {meta['machine']}, {meta['when']}; {meta['steps']} steps per run, "
        "1 KB replies, one model and one tool activity per step.",
        "",
    ]
    notes = [f"- {row['system']}: {row['error']}" for row in rows if "error" in row]
    notes += [
        f"- {row['system']} failed in its {phase} phase (its other figures are kept): {why}"
        for row in rows
        for phase, why in row.get("failed_phases", {}).items()
    ]
    measured = [row for row in rows if "error" not in row]
    if any("steps_per_s_1" in row for row in measured):
        lines += _main_table(rows, raw, meta, notes)
    lines += cost_lines(measured, raw)
    lines += waiting_lines(measured)
    lines += travel_lines(measured)
    lines += ["", *_ours_lines(rows), *notes]
    return "\n".join(lines) + "\n"


def _main_table(
    rows: list[dict[str, Any]], raw: dict[str, Any] | None, meta: dict[str, Any], notes: list[str]
) -> list[str]:
    many = f"steps/s, {meta['concurrent']} runs"
    head = ["system", "steps/s, 1 run", many, "x raw (1 / many)"]
    head += [f"B/step @{n}" for n in SIZE_COLUMNS]
    head += ["fails at step", "peak RSS MB", f"rebuild {meta.get('rebuild_steps', 500)} steps"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['system']} | " + " | ".join(["-"] * (len(head) - 1)) + " |")
            continue
        lines.append("| " + " | ".join(_cells(row, raw)) + " |")
        fail = row.get("fails_at", _NOT_TRIED)
        if fail["steps"] is not None:
            notes.append(
                f"- {row['system']} failed after {fail['steps']} steps "
                f"({fail['history_bytes'] / 1e6:.1f} MB of history): {fail['error']}"
            )
    return lines


_NOT_TRIED = {"steps": None, "tried": "-"}
_NOT_REBUILT = {"seconds": None, "note": "-"}


def _cells(row: dict[str, Any], raw: dict[str, Any] | None) -> list[str]:
    sizes = {int(k): v for k, v in row.get("bytes_per_step", {}).items()}
    ratio = "-"
    if raw is not None and "steps_per_s_1" in raw and "steps_per_s_1" in row:
        one = row["steps_per_s_1"] / raw["steps_per_s_1"]
        ratio = f"{one:.2f} / {row['steps_per_s_many'] / raw['steps_per_s_many']:.2f}"
    fail = row.get("fails_at", _NOT_TRIED)
    rebuild = row.get("rebuild", _NOT_REBUILT)
    return [
        row["system"],
        f"{row['steps_per_s_1']:.1f}" if "steps_per_s_1" in row else "-",
        f"{row['steps_per_s_many']:.1f}" if "steps_per_s_many" in row else "-",
        ratio,
        *(_size_cell(sizes, n, fail["steps"]) for n in SIZE_COLUMNS),
        str(fail["steps"]) if fail["steps"] is not None else f"none in {fail['tried']}",
        f"{row['peak_rss_mb']:.0f}",
        f"{rebuild['seconds']:.2f} s" if rebuild["seconds"] is not None else rebuild["note"],
    ]


def _size_cell(sizes: dict[int, float], steps: int, failed_at: int | None) -> str:
    if steps in sizes:
        return f"{sizes[steps]:,.0f}"
    return "fails" if failed_at is not None and failed_at < steps else "-"


def _ours_lines(rows: list[dict[str, Any]]) -> list[str]:
    ours = next((r for r in rows if r["system"] == "durable-agents" and "error" not in r), None)
    if ours is None or "bytes_per_step" not in ours:
        return []
    sizes = {int(k): v for k, v in ours["bytes_per_step"].items()}
    chains = {int(k): v for k, v in ours.get("chain_runs", {}).items()}
    lines = [
        "- durable-agents by run length: "
        + ", ".join(
            f"{n:,} steps {b:,.0f} B/step"
            + (f" (chain of {chains[n]} runs)" if chains.get(n, 1) > 1 else "")
            for n, b in sorted(sizes.items())
        )
    ]
    for peer in rows:
        if peer is ours or "error" in peer or peer["system"].startswith("raw"):
            continue
        if "bytes_per_step" not in peer or "fails_at" not in peer:
            continue
        theirs = {int(k): v for k, v in peer["bytes_per_step"].items()}
        fail = peer["fails_at"]
        at = max((n for n in theirs if n in sizes and n <= COMPARE_AT), default=None)
        if at == COMPARE_AT or (at is not None and fail["steps"] is None):
            ratio, where = theirs[at] / sizes[at], f"at {at} steps"
        elif fail["steps"] and COMPARE_AT in sizes:
            # It never reached the comparison point: its bytes per step where it stopped.
            ratio = fail["history_bytes"] / fail["steps"] / sizes[COMPARE_AT]
            where = f"at {fail['steps']} steps, where it failed (ours at {COMPARE_AT})"
        else:
            continue
        lines.append(
            f"- {peer['system']} stores {ratio:.0f}x the bytes per step of durable-agents {where}"
        )
    return lines


def write_chart(rows: list[dict[str, Any]], folder: Path) -> Path | None:
    """History bytes against steps, log-log, one line per system; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for row in rows:
        if "error" in row or "bytes_per_step" not in row:
            continue
        points = sorted((int(k), v * int(k)) for k, v in row["bytes_per_step"].items())
        line = axes.plot([p[0] for p in points], [p[1] for p in points], marker="o")[0]
        label = row["system"]
        fail = row.get("fails_at", _NOT_TRIED)
        if fail["steps"] is not None:
            axes.plot([fail["steps"]], [fail["history_bytes"]], "x", color=line.get_color(), ms=10)
            label += f" (fails at step {fail['steps']})"
        line.set_label(label)
    axes.axhline(HISTORY_LIMIT, color="grey", linestyle="--", linewidth=1)
    axes.text(11, HISTORY_LIMIT * 1.15, "Temporal's 50 MB history limit", color="grey")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("steps in the run (model call + tool call)")
    axes.set_ylabel("history / checkpoint bytes")
    axes.set_title("Stored bytes against run length (1 KB replies)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    path = folder / "history-bytes.png"
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
