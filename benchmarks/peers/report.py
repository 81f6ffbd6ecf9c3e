"""Render docs/peers.md from the results run.py keeps (benchmarks/peers/out/results.json).

One table with a row per measure and a column per peer, then the settings
and versions, the evidence about KCL on kinesis-mock, and every row a peer
wins with its explanation (explanations.py). Nothing here measures: a row
with no result says why (the peer's note) or "not run".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from explanations import FINDINGS, SETTINGS_TEXT, intro
from peers import PEERS

OURS = "kinesis-src"
UNPACED = "kinesis-src, 2 MB/s/shard pacing off"
Cell = Callable[[dict], str]


def num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def single_rows(section: dict, label: str) -> list[tuple[str, Cell, str]]:
    """Rows for one start-up/speed section: (title, cell from a result, better = "low"/"high")."""
    return [
        (f"{label}: records/s (first to last record)", lambda r: num(r.get("records_per_s")), "high"),
        (f"{label}: CPU µs per record (worker's process tree)", lambda r: num(r.get("cpu_us_per_record"), 1), "low"),
        (f"{label}: max RSS, MB", lambda r: num(r.get("max_rss_mb")), "low"),
        (f"{label}: all records delivered", lambda r: finished(r), ""),
    ]


def finished(r: dict) -> str:
    if "delivered" not in r:
        return "not run"
    if r.get("finished"):
        extra = r["delivered"] - r["expected"]
        return "yes" + (f" (+{extra} again)" if extra else "")
    return f"no: {r['distinct']:,} of {r['expected']:,}"


def steady_rows(label: str) -> list[tuple[str, Cell, str]]:
    return [
        (f"{label}: put-to-process latency p50, ms", lambda r: num(r.get("latency_p50_ms")), "low"),
        (f"{label}: put-to-process latency p95, ms", lambda r: num(r.get("latency_p95_ms")), "low"),
        (f"{label}: DynamoDB requests per shard-minute", lambda r: num(r.get("ddb_per_shard_minute"), 1), "low"),
        (f"{label}: DynamoDB capacity units per shard-minute",
         lambda r: num(r.get("ddb_capacity_per_shard_minute"), 1), "low"),
        (f"{label}: worker CPU seconds per minute", lambda r: num(r.get("cpu_s_per_minute"), 1), "low"),
    ]


def scale_rows() -> list[tuple[str, Cell, str]]:
    label = "Scale-in/out (SIGTERM one of 2 workers, then add one; 50 records/s)"
    return [
        (f"{label}: records delivered again", lambda r: num(r.get("duplicated")) if r.get("acknowledged") else "—", "low"),
        (f"{label}: records missing", lambda r: num(r.get("missing")) if r.get("acknowledged") else "—", "low"),
        (f"{label}: stopped worker exited by itself", lambda r: yes_no(r.get("stopped_by_itself")), ""),
        (f"{label}: longest pause of a key after the stop, s", lambda r: num(r.get("pause_after_stop_s"), 1), "low"),
        (f"{label}: longest pause of a key after the add, s", lambda r: num(r.get("pause_after_add_s"), 1), "low"),
    ]


def yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no (killed after the grace time)")


TORTURE_LABELS = {
    "plain": "Torture",
    "after-first-sync": "Torture, reshards only after the first record",
    "gentle": "Torture, one worker first; reshards and 2 more workers after its first record",
}


def torture_rows(mode: str) -> list[tuple[str, Cell, str]]:
    label = TORTURE_LABELS[mode]
    return [
        (f"{label}: finished (all acknowledged records delivered)", lambda r: torture_finished(r), ""),
        (f"{label}: missing records", lambda r: num(r.get("missing")) if r.get("delivered") else "—", "low"),
        (f"{label}: duplicated deliveries", lambda r: num(r.get("duplicated")) if r.get("delivered") else "—", "low"),
        (f"{label}: per-key order inversions", lambda r: num(r.get("order_inversions")) if r.get("delivered") else "—",
         "low"),
        (f"{label}: seconds from the kill until its keys are delivered again",
         lambda r: num(r.get("recovery_s"), 1), "low"),
        (f"{label}: DynamoDB requests per shard-minute, 10 s before the kill / 10 s after it",
         lambda r: window_cell(r, "requests"), ""),
        (f"{label}: DynamoDB capacity units per shard-minute, 10 s before the kill / 10 s after it",
         lambda r: window_cell(r, "capacity"), ""),
    ]


def window_cell(r: dict, measure: str) -> str:
    before, after = r.get("ddb_before_kill") or {}, r.get("ddb_after_kill") or {}
    if measure not in before or measure not in after:
        return "—"
    return f"{before[measure]:.1f} / {after[measure]:.1f}"


def torture_finished(r: dict) -> str:
    if not r:
        return "not run"
    if r.get("finished"):
        return f"yes, {r['seconds']:.0f} s"
    return "no" if r.get("delivered") else "no: nothing delivered"


def value_of(text: str) -> float | None:
    try:
        return float(text.replace(",", "").split()[0])
    except (ValueError, IndexError):
        return None


def table(results: dict) -> tuple[list[str], list[str]]:
    """The main table's lines, and the (row, peer) cells where a peer beats kinesis-src."""
    names = list(PEERS)
    lines = ["| measure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    wins: list[str] = []
    startup = results.get("startup", {}).get("data", {})
    speed = results.get("speed", {}).get("data", {})
    torture = results.get("torture", {}).get("data", {}).get("results", {})
    sections: list[tuple[list[tuple[str, Cell, str]], dict]] = []
    if startup:
        first = [("Start-up: seconds from process start to the first record (kinesis-mock)",
                  lambda r: num(r.get("first_record_s"), 1), "low")]
        label = f"Start-up run (kinesis-mock, 4 shards, {startup['records']:,} records preloaded)"
        rows = [r for r in single_rows(startup, label) if "records/s" not in r[0] and "CPU" not in r[0]]
        sections.append((first + rows, startup["results"]))
    for shards in ("4", "32"):
        if shards in speed:
            s = speed[shards]
            label = f"Replay endpoint, {s['shards']} shards x {s['records_per_shard']:,} records of {s['size']} B"
            sections.append((single_rows(s, label), s["results"]))
    steady = results.get("steady", {}).get("data", {})
    if steady:
        label = f"Steady {steady['rate']:.0f} records/s, {steady['shards']} shards, {steady['window_s']:.0f} s (kinesis-mock)"
        sections.append((steady_rows(label), steady["results"]))
    scale = results.get("scale", {}).get("data", {})
    if scale:
        sections.append((scale_rows(), scale["results"]))
    for mode in TORTURE_LABELS:
        rows = {peer: modes.get(mode, {}) for peer, modes in torture.items()}
        if any(rows.values()):
            sections.append((torture_rows(mode), rows))
    for rows, by_peer in sections:
        for title, cell, better in rows:
            cells = [cell(by_peer.get(n, {})) if by_peer.get(n) else "not run" for n in names]
            lines.append(f"| {title} | " + " | ".join(cells) + " |")
            wins.extend(beaten(title, names, cells, better))
    return lines, wins


def beaten(title: str, names: list[str], cells: list[str], better: str) -> list[str]:
    ours = value_of(cells[names.index(OURS)])
    if not better or ours is None:
        return []
    out = []
    for name, text in zip(names, cells):
        theirs = value_of(text)
        if name != OURS and theirs is not None and (theirs > ours if better == "high" else theirs < ours):
            out.append(f"- **{title}**: {name} {text} vs kinesis-src {cells[names.index(OURS)]}.")
    return out


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # colour codes a peer's log puts in a quoted line


def notes(results: dict) -> list[str]:
    """Every peer note (crash, give-up, why not run), by workload."""
    out = []
    for workload in ("startup", "speed", "steady", "scale", "torture"):
        data = results.get(workload, {}).get("data", {})
        if workload in ("startup", "steady", "scale", "torture"):
            data = {"": data}
        for key, section in data.items():
            for peer, r in (section.get("results", {}) if isinstance(section, dict) else {}).items():
                for mode, rr in (r.items() if workload == "torture" else [("", r)]):
                    if isinstance(rr, dict) and rr.get("note"):
                        where = f"{workload} {key}".strip() + (f" {mode}" if mode else "")
                        out.append(f"- {peer}, {where}: {ANSI_ESCAPE.sub('', rr['note'])}")
    return out


def listing_lines(results: dict) -> list[str]:
    data = results.get("listing", {}).get("data")
    if not data:
        return ["(not run)"]
    if "kinesis-mock" in data:  # one probe per endpoint
        data = {k: v for k, v in data.items() if isinstance(v, dict) and k not in ("endpoint", "listings")}
    else:  # a single endpoint's probe
        data = {"kinesis-mock": data}
    lines: list[str] = []
    for endpoint, probe in data.items():
        lines += [f"**{endpoint}**:", ""] + probe_lines(probe) + [""]
    return lines


def probe_lines(probe: dict) -> list[str]:
    if "listings" not in probe:
        return [probe.get("note", "(not run)")]
    lines = ["| when | ShardFilter | shards returned | KCL's check |", "|---|---|---|---|"]
    for x in probe["listings"]:
        if x["filter"] == "none":
            verdict = "not checked (a full listing holds parents and children on AWS too)"
        else:
            verdict = "accepts" if x["kcl_accepts"] else f"rejects: {x['why']}"
        lines.append(f"| {x['phase']} | {x['filter']} | {', '.join(x['shards'])} | {verdict} |")
    return lines


def unpaced_lines(results: dict) -> list[str]:
    """The speed runs of kinesis-src with its 2 MB/s/shard read pacing off (not a column: a control)."""
    out = []
    for shards, section in sorted(results.get("speed", {}).get("data", {}).items()):
        r = section.get("results", {}).get(UNPACED)
        if r and r.get("records_per_s"):
            out.append(f"- Replay endpoint, {shards} shards: kinesis-src with that pacing off delivered "
                       f"{num(r['records_per_s'])} records/s at {num(r['cpu_us_per_record'], 1)} CPU µs per record "
                       f"(max RSS {num(r['max_rss_mb'])} MB).")
    return out


def ddb_lines(results: dict) -> list[str]:
    rows = results.get("steady", {}).get("data", {}).get("results", {})
    names = {"?": "no X-Amz-Target"}
    out = [f"- {peer}: " + (", ".join(f"{names.get(op, op)} {n}" for op, n in sorted(r["ddb_by_operation"].items()))
                            or "none")
           for peer, r in rows.items() if r.get("ddb_by_operation") is not None]
    return out or ["(not run)"]


def render(results: dict) -> str:
    env = results.get("environment", {})
    lines, wins = table(results)
    versions = env.get("versions", {})
    out = [intro(results, env), "", *lines, "", "DynamoDB requests by operation over the steady window (all shards):",
           "", *ddb_lines(results), "", "## Versions", ""]
    out += [f"- {name}: {versions.get(name, '?')}" for name in PEERS]
    out += [f"- Python {env.get('python', '?')}, {env.get('java', '?')}, {env.get('cpus', '?')} CPUs, "
            f"{env.get('machine', '?')}", "", SETTINGS_TEXT, "", "## KCL on kinesis-mock: whose fault", "",
            FINDINGS["listing"], "", *listing_lines(results), "", "## Where a peer wins a row", ""]
    out += wins or ["No row."]
    control = unpaced_lines(results)
    if control:
        out += ["", "Control runs (kinesis-src on the replay endpoint with its 2 MB/s/shard read pacing off; not a column):",
                "", *control]
    out += ["", FINDINGS["wins"], "", "## Run notes", "",
            "Every note a run left (crashes, give-ups, why a peer was not run, whom the torture killed). The "
            "runs that delivered nothing are explained in \"KCL on kinesis-mock: whose fault\" above.", ""]
    out += notes(results) or ["Nothing to report."]
    return "\n".join(out) + "\n"
