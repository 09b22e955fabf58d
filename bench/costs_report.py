"""The tables and charts of ``python -m bench --costs``: one table and one PNG per curve, every broker on each."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

COLOURS = {"trafka": "tab:blue", "kafka": "tab:orange"}
MiB = 1024 * 1024


def _points(document: dict[str, Any], name: str, curve: str) -> list[dict[str, Any]]:
    return document["results"].get(name, {}).get(curve, {}).get("points", [])


def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "n/a"


def _pair(point: dict[str, Any], first: str, second: str, fmt: str) -> str:
    if first not in point and second not in point:
        return "n/a"
    return f"{_num(point.get(first), fmt)} / {_num(point.get(second), fmt)}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _by_x(document: dict[str, Any], names: list[str], curve: str, x: str) -> dict[int, dict[str, dict[str, Any]]]:
    """Each x value of the curve with every broker's point there."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for name in names:
        for point in _points(document, name, curve):
            out.setdefault(point[x], {})[name] = point
    return dict(sorted(out.items()))


def _per_unit(points: list[dict[str, Any]], x: str, key: str, scale: float) -> dict[int, float]:
    """Growth of ``key`` over the curve's first point, per unit of ``x``, times ``scale``."""
    if not points or key not in points[0]:
        return {}
    base = points[0]
    return {p[x]: (p[key] - base[key]) * scale / (p[x] - base[x]) for p in points[1:]
            if key in p and p[x] != base[x]}


def partitions_allowed(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    """How many partitions the broker could hold under this machine's limits: descriptors (its own
    RLIMIT_NOFILE, and fs.nr_open, as far as root may raise it) and vm.max_map_count, from what it held
    per partition at the largest point measured."""
    result = document["results"].get(name, {}).get("partitions", {})
    points, empty = result.get("points"), result.get("empty")
    if not points or not empty:
        return None
    last = points[-1]
    fds = (last["open_fds"] - empty["open_fds"]) / last["partitions"]
    maps = (last["memory_maps"] - empty["memory_maps"]) / last["partitions"]
    limits = document["limits"]
    nofile = result["nofile"][0]
    out = {"fds_per_partition": round(fds, 2), "maps_per_partition": round(maps, 2), "nofile": nofile}
    if fds > 0:
        out["by_nofile"] = int((nofile - empty["open_fds"]) / fds)
        out["by_nr_open"] = int((limits["fs_nr_open"] - empty["open_fds"]) / fds)
    if maps > 0 and limits.get("vm_max_map_count"):
        out["by_max_map_count"] = int((limits["vm_max_map_count"] - empty["memory_maps"]) / maps)
    return out


def report(document: dict[str, Any]) -> str:
    names = [n for n in ("trafka", "kafka") if n in document["results"]]
    machine, limits = document["machine"], document["limits"]
    lines = [
        f"Costs, {document['started_at']} ({document['duration_s']:.0f} s), `{document['command']}`; load average "
        f"(1 min) {machine['load_average_before'][0]:.2f} before, {machine['load_average_after'][0]:.2f} after, on "
        f"{machine['cpu_cores']} cores",
        "",
        f"Limits: the bench's RLIMIT_NOFILE {limits['bench_nofile'][0]:,} (soft) / {limits['bench_nofile'][1]:,} "
        f"(hard), from {limits['bench_nofile_before'][0]:,} / {limits['bench_nofile_before'][1]:,}, which its "
        f"brokers inherit; fs.nr_open {limits['fs_nr_open']:,}; fs.file-max {limits['fs_file_max']:,}; "
        f"vm.max_map_count {limits['vm_max_map_count']:,}; local ports {'-'.join(limits['ip_local_port_range'])}."
        + (f" Not raised further: {limits['refused']} (no CAP_SYS_RESOURCE here)." if limits.get("refused") else ""),
    ]
    for curve, section in (("connections", _connections), ("partitions", _partitions), ("metadata", _metadata),
                           ("commits", _commits), ("producers", _producers)):
        if any(curve in document["results"][n] for n in names):
            lines += ["", *section(document, names)]
    errors = [f"- {name} {curve}: {_error_text(result)}" for name in names
              for curve, result in document["results"][name].items() if _error_text(result)]
    if errors:
        lines += ["", "Errors:", "", *errors]
    for note in document.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _error_text(result: dict[str, Any]) -> str:
    errors = [result["error"]] if "error" in result else []
    errors += [f"at {p.get('connections', p.get('partitions', p.get('topics', p.get('producers'))))}: {p['error']}"
               for p in result.get("points", []) if "error" in p]
    return "; ".join(errors)


def _connections(document: dict[str, Any], names: list[str]) -> list[str]:
    rows = []
    per_connection = {n: _per_unit(_points(document, n, "connections"), "connections", "rss_mb", 1024) for n in names}
    for count, by_name in _by_x(document, names, "connections", "connections").items():
        row = [f"{count:,}"]
        row += [_num(by_name.get(n, {}).get("rss_mb"), ".1f") for n in names]
        row += [_num(per_connection[n].get(count), ".1f") for n in names]
        row += [_pair(by_name.get(n, {}), "p50_ms", "p99_ms", ".2f") for n in names]
        row += [_num(by_name.get(n, {}).get("closed_by_broker"), ",") for n in names]
        rows.append(row)
    header = ["idle connections", *(f"{n} RSS (MiB)" for n in names), *(f"{n} KiB per connection" for n in names),
              *(f"{n} produce p50 / p99 (ms)" for n in names), *(f"{n} closed by the broker" for n in names)]
    return ["Idle connections: broker RSS, and acks=1 produce latency of another client meanwhile "
            "(KiB per connection: RSS over the 0-connection point, per connection)", "", *_table(header, rows)]


def _partitions(document: dict[str, Any], names: list[str]) -> list[str]:
    rows = []
    for count, by_name in _by_x(document, names, "partitions", "partitions").items():
        row = [f"{count:,}"]
        row += [_num(by_name.get(n, {}).get("rss_mb"), ".1f") for n in names]
        row += [_pair(by_name.get(n, {}), "ready_s", "serving_s", ".2f") for n in names]
        row += [_num(by_name.get(n, {}).get("create_s"), ".2f") for n in names]
        row += [_pair(by_name.get(n, {}), "open_fds", "memory_maps", ",") for n in names]
        rows.append(row)
    header = ["partitions", *(f"{n} RSS after restart (MiB)" for n in names),
              *(f"{n} restart: ready / serving (s)" for n in names), *(f"{n} creating them (s)" for n in names),
              *(f"{n} descriptors / maps" for n in names)]
    lines = ["Partitions: created, then the broker restarted on its data (serving: Metadata lists every partition "
             "with a leader)", "", *_table(header, rows)]
    for name in names:
        allowed = partitions_allowed(document, name)
        if allowed:
            lines += ["", f"{name}: {allowed['fds_per_partition']} descriptors and {allowed['maps_per_partition']} "
                      f"memory maps per partition; its RLIMIT_NOFILE of {allowed['nofile']:,} allows about "
                      f"{allowed.get('by_nofile', 0):,} partitions, fs.nr_open about {allowed.get('by_nr_open', 0):,}, "
                      f"vm.max_map_count about {allowed.get('by_max_map_count', 0):,}."]
    return lines


def _metadata(document: dict[str, Any], names: list[str]) -> list[str]:
    rows = []
    for count, by_name in _by_x(document, names, "metadata", "topics").items():
        row = [f"{count:,}"]
        row += [_pair(by_name.get(n, {}), "p50_ms", "p99_ms", ".2f") for n in names]
        row += [_num(by_name.get(n, {}).get("response_bytes", 0) / 1024 if n in by_name else None, ",.1f")
                for n in names]
        row += [_num(by_name.get(n, {}).get("requests"), ",") for n in names]
        rows.append(row)
    header = ["topics", *(f"{n} p50 / p99 (ms)" for n in names), *(f"{n} answer (KiB)" for n in names),
              *(f"{n} requests" for n in names)]
    notes = [f"{n}: {p['note']}; the curve ends there." for n in names for p in _points(document, n, "metadata")
             if "note" in p]
    return ["Metadata for all topics (v12), one request at a time, to the last byte of the answer", "",
            *_table(header, rows), *(["", *notes] if notes else [])]


def _commits(document: dict[str, Any], names: list[str]) -> list[str]:
    results = {n: document["results"][n].get("commits", {}) for n in names}
    plan = document["plan"]

    def row(label: str, value: Callable[[dict[str, Any]], str]) -> list[str]:
        return [label, *(value(results[n]) if results[n] and "commits" in results[n] else "n/a" for n in names)]

    rows = [
        row("commits measured (skipped: the last one unanswered)",
            lambda r: f"{r['commits']:,} ({r.get('skipped', 0):,} skipped)"),
        row("commit latency p50 / p99 / p99.9 / max (ms)",
            lambda r: f"{_num(r.get('p50_ms'), '.2f')} / {_num(r.get('p99_ms'), '.2f')} / "
                      f"{_num(r.get('p999_ms'), '.2f')} / {_num(r.get('max_ms'), '.1f')}"),
        row("errors", lambda r: ", ".join(f"{k}: {v}" for k, v in r.get("errors_by_code", {}).items()) or "none"),
        row("__consumer_offsets segments: start -> end (MB)",
            lambda r: f"{r['offsets_log_bytes_start'] / 1e6:.2f} -> {r['offsets_log_bytes_end'] / 1e6:.2f}"),
        row("growth per commit (bytes)", lambda r: f"{r['offsets_log_bytes_per_commit']:.0f}"),
        row("growth per hour at this rate (GB)",
            lambda r: f"{r['offsets_log_growth_bytes'] / r['window_s'] * 3600 / 1e9:.2f}"),
        row("__consumer_offsets allocated on disk, all files: start -> end (MB)",
            lambda r: f"{r['offsets_allocated_bytes_start'] / 1e6:.1f} -> "
                      f"{r['offsets_allocated_bytes_end'] / 1e6:.1f}"),
        row("broker RSS: start -> end (MiB)", lambda r: f"{r['rss_mb_start']:.0f} -> {r['rss_mb_end']:.0f}"),
    ]
    return [f"{plan['groups']:,} consumer groups, each committing once a second for {plan['commit_seconds']} s "
            "(OffsetCommit v9, one connection per group)", "", *_table(["", *names], rows)]


def _producers(document: dict[str, Any], names: list[str]) -> list[str]:
    rows = []
    for count, by_name in _by_x(document, names, "producers", "producers").items():
        row = [f"{count:,}"]
        row += [_num(by_name.get(n, {}).get("records_per_s"), ",.0f") for n in names]
        if {"trafka", "kafka"} <= set(by_name) and by_name["kafka"].get("records_per_s"):
            row.append(_num(by_name["trafka"].get("records_per_s", 0) / by_name["kafka"]["records_per_s"], ".2f") + "x")
        elif len(names) == 2:
            row.append("n/a")
        row += [_num(by_name.get(n, {}).get("broker_cores"), ".2f") for n in names]
        row += [_num(by_name.get(n, {}).get("processes"), "d") for n in names[:1]]
        rows.append(row)
    header = ["producers", *(f"{n} records/s" for n in names), *(["trafka/kafka"] if len(names) == 2 else []),
              *(f"{n} broker cores" for n in names), "client processes"]
    plan = document["plan"]
    return [f"Concurrent producers: {plan['producer_records']:,} x {plan['record_size']} B between them, acks=1, "
            f"median of {plan['repeats']} round(s) in turns", "", *_table(header, rows)]


# ---------------------------------------------------------------------------------------------------
# Charts


def chart_path(results_path: Path, curve: str) -> Path:
    return results_path.with_name(f"{results_path.stem}-{curve}.png")


def charts(document: dict[str, Any], results_path: Path) -> list[Path]:
    """One PNG per curve measured, beside the results file; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    names = [n for n in ("trafka", "kafka") if n in document["results"]]
    drawers = {"connections": _draw_connections, "partitions": _draw_partitions, "metadata": _draw_metadata,
               "commits": _draw_commits, "producers": _draw_producers}
    written = []
    for curve, draw in drawers.items():
        if not any(_points(document, n, curve) or document["results"][n].get(curve, {}).get("per_second")
                   for n in names):
            continue
        figure, axes = pyplot.subplots(1, 2, figsize=(12, 4.5)) if curve != "metadata" and curve != "producers" \
            else pyplot.subplots(1, 1, figsize=(7, 4.5))
        draw(document, names, list(axes) if hasattr(axes, "__len__") else [axes])
        figure.suptitle(f"{curve}: {document['started_at']}, {document['machine']['cpu_cores']} cores", fontsize=10)
        figure.tight_layout()
        path = chart_path(results_path, curve)
        figure.savefig(path, dpi=110)
        pyplot.close(figure)
        written.append(path)
    return written


def _series(document: dict[str, Any], name: str, curve: str, x: str, y: str) -> tuple[list[Any], list[Any]]:
    points = [p for p in _points(document, name, curve) if isinstance(p.get(y), (int, float))]
    return [p[x] for p in points], [p[y] for p in points]


def _plot(axis: Any, document: dict[str, Any], names: list[str], curve: str, x: str,
          lines: list[tuple[str, str, str]]) -> None:
    for name in names:
        for y, style, label in lines:
            xs, ys = _series(document, name, curve, x, y)
            if xs:
                axis.plot(xs, ys, style, color=COLOURS[name], marker="o", label=f"{name} {label}".strip())
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)


def _draw_connections(document: dict[str, Any], names: list[str], axes: list[Any]) -> None:
    _plot(axes[0], document, names, "connections", "connections", [("rss_mb", "-", "")])
    axes[0].set(xlabel="idle connections", ylabel="broker RSS (MiB)", title="memory")
    _plot(axes[1], document, names, "connections", "connections", [("p50_ms", "--", "p50"), ("p99_ms", "-", "p99")])
    axes[1].set(xlabel="idle connections", ylabel="ms", title="acks=1 produce latency of another client")


def _draw_partitions(document: dict[str, Any], names: list[str], axes: list[Any]) -> None:
    _plot(axes[0], document, names, "partitions", "partitions", [("rss_mb", "-", "")])
    axes[0].set(xlabel="partitions", ylabel="broker RSS after restart (MiB)", title="memory")
    _plot(axes[1], document, names, "partitions", "partitions",
          [("ready_s", "--", "ready"), ("serving_s", "-", "serving")])
    axes[1].set(xlabel="partitions", ylabel="s", title="restart to ready / to serving every partition")


def _draw_metadata(document: dict[str, Any], names: list[str], axes: list[Any]) -> None:
    _plot(axes[0], document, names, "metadata", "topics", [("p50_ms", "--", "p50"), ("p99_ms", "-", "p99")])
    axes[0].set(xscale="log", yscale="log", xlabel="topics (1 partition each)", ylabel="ms",
                title="Metadata for all topics")
    _plain_ticks(axes[0], document["plan"]["topics"])


def _draw_commits(document: dict[str, Any], names: list[str], axes: list[Any]) -> None:
    for name in names:
        result = document["results"][name].get("commits", {})
        seconds = result.get("per_second", [])
        for key, style in (("p50_ms", "--"), ("p99_ms", "-")):
            points = [(s["second"], s[key]) for s in seconds if key in s]
            if points:
                axes[0].plot(*zip(*points), style, color=COLOURS[name], label=f"{name} {key[:3]}")
        series = result.get("offsets_series", [])
        if series:
            axes[1].plot([s[0] for s in series], [s[1] / 1e6 for s in series], "-", color=COLOURS[name], label=name)
    plan = document["plan"]
    axes[0].set(xlabel="second of the run", ylabel="ms", yscale="log",
                title=f"OffsetCommit latency, {plan['groups']:,} groups once a second")
    axes[1].set(xlabel="seconds into the run", ylabel="MB", title="__consumer_offsets segments on disk")
    for axis in axes:
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)


def _draw_producers(document: dict[str, Any], names: list[str], axes: list[Any]) -> None:
    _plot(axes[0], document, names, "producers", "producers", [("records_per_s", "-", "")])
    axes[0].set(xscale="log", xlabel="concurrent producer instances", ylabel="records/s (1 KB, acks=1)",
                title="produce throughput", ylim=(0, None))
    _plain_ticks(axes[0], document["plan"]["producers"])


def _plain_ticks(axis: Any, values: list[int]) -> None:
    """The points measured as the ticks of a log axis, written out in full."""
    axis.set_xticks(values, [f"{v:,}" for v in values])
    axis.minorticks_off()
