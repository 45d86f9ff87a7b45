"""The HTML run report: one self-contained file, no script, nothing fetched when it opens.

``render(data)`` returns the page for a runtime report (single-process or merged); ``write(data,
path)`` writes it atomically. The page has a header (verdict, command, environment, effective
batch), the findings (rule link, source lines, first step, how often), the plots of ``charts``,
the ranks of a distributed run and the optimizers. A Content-Security-Policy of ``default-src
'none'`` makes the browser refuse any fetch, so the file stays offline by construction.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from html import escape
from pathlib import Path
from typing import Any

from loopcheck import __version__
from loopcheck.formats import rule_url

from . import charts
from .data import effective_batch, section, series, verdict, world_size
from .findings import display_path, occurrence, source_context, to_finding


def render(data: dict[str, Any]) -> str:
    s = series(data)
    level, sentence = verdict(data)
    argv = data.get("command")
    name = _script_name(argv, data)
    plots = [("backward passes per step (histogram)", charts.backward_histogram_chart(data)),
             ("backward passes per step over the run", charts.backward_over_time_chart(data, s)),
             ("learning rate per param group", charts.lr_chart(data, s)),
             ("GradScaler scale and skipped steps", charts.scale_chart(data, s)),
             ("memory per step", charts.memory_chart(data, s)),
             ("optimizer, scheduler and EMA ticks", charts.ticks_chart(data, s))]
    body = [_header(data, level, sentence, argv), _findings(data), _plots(plots, data), _distributed(data),
            _optimizers(data),
            f'<footer>loopcheck {escape(__version__)} · report schema {escape(str(data.get("schema", "?")))} · '
            "one self-contained file: no script, no network</footer>"]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>loopcheck: {escape(name)} — {escape(sentence)}</title><style>{CSS}</style></head>"
        f'<body><main>{"".join(body)}</main></body></html>\n')


def write(data: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write the page atomically (a temporary file in the same folder, then a rename)."""
    target = Path(path).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    page = render(data)
    fd, tmp = tempfile.mkstemp(prefix=".loopcheck-", suffix=".html.tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the page from a web server or colleague
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _script_name(argv: list[str] | None, data: dict[str, Any]) -> str:
    for arg in argv or []:
        if arg.endswith(".py"):
            return os.path.basename(arg)
    files = [f.get("file") for f in data.get("findings") or [] if f.get("file")]
    return os.path.basename(files[0]) if files else "run"


def _dl(rows: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _header(data: dict[str, Any], level: str, sentence: str, argv: list[str] | None) -> str:
    rows = []
    rows.append(("command", f"<code>{escape(shlex.join(argv))}</code>" if argv else "not recorded"))
    exit_ = data.get("exit") or {}
    how, code = exit_.get("how", "unknown"), exit_.get("code")
    duration = data.get("duration_s")
    rows.append(("exit", escape(f"{how}" + (f", exit code {code}" if code is not None else "")
                                + (f", after {duration:.1f} s" if isinstance(duration, (int, float)) else ""))))
    env = data.get("environment") or {}
    device = env.get("device_name") or env.get("device") or "?"
    rows.append(("environment", escape(f"torch {env.get('torch', '?')}, Python {env.get('python', '?')}, "
                                       f"{env.get('platform', '?')}, {device}")))
    rows.append(("effective batch", _batch_text(data)))
    counters = data.get("counters") or {}
    skipped = counters.get("skipped_steps") or 0
    rows.append(("counts", escape(f"{counters.get('optimizer_steps', 0)} optimizer steps"
                                  + (f" ({skipped} skipped by GradScaler)" if skipped else "")
                                  + f", {counters.get('backward_passes', 0)} backward passes, "
                                  f"{counters.get('zero_grad_calls', 0)} zero_grad calls, "
                                  f"{counters.get('clip_calls', 0)} clip calls")))
    disabled = data.get("disabled_checks") or []
    if disabled:
        rows.append(("disabled checks", "<br>".join(escape(d) for d in disabled)))
    return (f'<header><h1>loopcheck run report</h1><p class="verdict {level}" id="verdict">{escape(sentence)}</p>'
            f"{_dl(rows)}<nav><a href=\"#findings\">findings</a> · <a href=\"#plots\">plots</a>"
            + (' · <a href="#distributed">ranks</a>' if world_size(data) > 1 else "")
            + ' · <a href="#optimizers">optimizers</a></nav></header>')


def _batch_text(data: dict[str, Any]) -> str:
    batch = effective_batch(data)
    if not batch:
        return "unknown (no DataLoader or DDP input seen)"
    micro, per_step, ranks = batch.get("micro_batch"), batch.get("backward_per_step"), batch.get("replicas") or 1
    total = batch.get("effective_batch")
    source = batch.get("micro_batch_source")
    factors = (f"{per_step} backward pass{'es' if per_step != 1 else ''} per step × {ranks} "
               f"rank{'s' if ranks != 1 else ''}")
    if not (total and micro):
        return f"unknown: the micro-batch size was not seen (no DataLoader or DDP input); {factors}"
    text = f"<strong>{total}</strong> = micro-batch {micro} × {factors}"
    return text + (f" <small>(micro-batch from {escape(str(source))})</small>" if source else "")


def _findings(data: dict[str, Any]) -> str:
    findings = data.get("findings") or []
    problems = section(data, "distributed", "problems") or []
    out = [f'<section id="findings"><h2>Findings ({len(findings)})</h2>']
    if not findings:
        out.append('<p class="none">No runtime finding: the checks that ran saw nothing wrong.</p>')
    world = world_size(data)
    for i, raw in enumerate(findings):
        f = to_finding(raw)
        out.append(f'<article class="finding {escape(f.severity)}" id="finding-{i}" data-code="{escape(f.code)}">'
                   f'<h3><span class="badge {escape(f.severity)}">{escape(f.severity)}</span> '
                   f'<a class="rule" href="{escape(rule_url(f.code))}">{escape(f.code)}</a> '
                   f"{escape(f.name)}</h3>"
                   f'<p class="where"><code>{escape(f.filename)}:{f.line}:{f.col}</code> · '
                   f'<span class="when">{escape(occurrence(raw, world))}</span></p>'
                   f'<p class="message">{escape(f.message)}</p>{_source(raw)}</article>')
    if problems:
        out.append('<h3 id="problems">Cross-rank problems</h3><ul class="problems">'
                   + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _source(raw: dict[str, Any]) -> str:
    start, lines = source_context(raw)
    if not lines:
        return ""
    line = raw.get("line")
    width = len(str(start + len(lines) - 1))
    rows = []
    for n, text in enumerate(lines, start):
        mark = ' class="hit"' if n == line else ""
        rows.append(f'<span{mark}><span class="ln">{n:>{width}}</span> {escape(text.expandtabs(4))}</span>')
    return f'<pre class="source" aria-label="source around line {line}">' + "".join(rows) + "</pre>"


def _plots(plots: list[tuple[str, str | None]], data: dict[str, Any]) -> str:
    drawn = [chart for _, chart in plots if chart]
    missing = [name for name, chart in plots if not chart]
    out = ['<section id="plots"><h2>Plots against the optimizer step</h2>', *drawn]
    if missing:
        why = ("this report has no per-step series (schema 1)" if "series" not in data
               else "nothing of the kind was recorded in this run")
        out.append(f'<p class="missing">Not shown: {escape(", ".join(missing))} ({why}).</p>')
    out.append("</section>")
    return "".join(out)


def _distributed(data: dict[str, Any]) -> str:
    section_ = data.get("distributed") or {}
    if world_size(data) < 2:
        return ""
    out = ['<section id="distributed"><h2>Ranks</h2>']
    chart = charts.ranks_chart(data)
    if chart:
        out.append(chart)
    check = section_.get("consistency") or {}
    if check.get("compared_steps"):
        if check.get("diverged_at_step") is not None:
            ranks = check.get("diverged_ranks") or []
            text = (f"Replicas diverged: rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} "
                    f"differ{'' if len(ranks) > 1 else 's'} from the first rank at step {check['diverged_at_step']}"
                    + (f" (they still agreed at step {check['last_agreeing_step']})"
                       if check.get("last_agreeing_step") is not None else "") + ".")
            out.append(f'<p class="diverged" id="divergence">{escape(text)}</p>')
        else:
            out.append(f'<p class="agree" id="divergence">Replicas agree at the {check["compared_steps"]} sampled '
                       f'steps (sampled every {check.get("every")} steps).</p>')
    missing = section_.get("missing_ranks") or []
    if missing:
        out.append(f'<p class="diverged">No report from rank{"s" if len(missing) > 1 else ""} '
                   f'{escape(", ".join(map(str, missing)))}.</p>')
    head = ("rank", "host", "exit", "optimizer steps", "backward passes", "peak memory", "findings",
            "micro-batches", "synced", "windows", "redundant all-reduces", "unsynced last micro-batches")
    rows = []
    for rank in section_.get("ranks") or []:
        ddp = rank.get("ddp") or []
        total = lambda key: sum(int(d.get(key) or 0) for d in ddp)  # noqa: E731
        peak = rank.get("peak_memory_bytes")
        redundant = total("redundant_allreduces")
        redundant_bytes = total("redundant_allreduce_bytes")
        cells = (rank.get("rank"), rank.get("host") or "", (rank.get("exit") or {}).get("how", ""),
                 rank.get("optimizer_steps"), rank.get("backward_passes"), charts.mib(peak) if peak else "n/a",
                 rank.get("findings"), total("micro_batches") if ddp else "", total("synced_micro_batches") if ddp
                 else "", total("windows") if ddp else "",
                 (f"{redundant} ({charts.mib(redundant_bytes)})" if redundant else "0") if ddp else "",
                 total("unsynced_last_micro_batches") if ddp else "")
        rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    out.append('<table class="ranks"><caption>Per rank: steps, backward passes and DDP gradient '
               "synchronisation</caption><thead><tr>" + "".join(f'<th scope="col">{h}</th>' for h in head)
               + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>")
    return "".join(out)


def _optimizers(data: dict[str, Any]) -> str:
    optimizers = data.get("optimizers") or []
    head = ("#", "type", "created at", "params", "steps", "skipped", "backward passes", "LR first / max")
    rows = []
    for opt in optimizers:
        lr = " / ".join(charts.number(v) if isinstance(v, (int, float)) else "?"
                        for v in (opt.get("first_lr"), opt.get("max_lr")))
        created = opt.get("created_at") or ""
        if ":" in created:
            path, _, line = created.rpartition(":")
            created = f"{display_path(path)}:{line}"
        cells = (opt.get("index"), opt.get("type"), created, opt.get("params"), opt.get("steps"),
                 opt.get("skipped_steps"), opt.get("backward_passes"), lr)
        rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    schedulers = (section(data, "counters", "schedulers") or []) + [
        {"type": e.get("type"), "updates": e.get("updates")} for e in section(data, "counters", "ema") or []]
    extra = "".join(f"<li>{escape(str(s.get('type')))}: {s.get('steps', s.get('updates'))} "
                    f"{'steps' if 'steps' in s else 'updates'}</li>" for s in schedulers)
    return ('<section id="optimizers"><h2>Optimizers</h2><table><thead><tr>'
            + "".join(f'<th scope="col">{h}</th>' for h in head) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>" + (f"<ul>{extra}</ul>" if extra else "") + "</section>")


CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--bg:#fff;--panel:#f5f7fa;--line:#d8dde6;--err:#c0262d;--warn:#a86500;
--info:#1f6fb2;--ok:#1b7f3b}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ef;--muted:#a3abba;--bg:#14171c;--panel:#1d2129;
--line:#343a46;--err:#ff6b6b;--warn:#f0b74a;--info:#6cb6ff;--ok:#5fd17f}}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
main{max-width:960px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:0 0 4px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:10px 0}dt{color:var(--muted)}dd{margin:0}
code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.verdict{font-size:18px;font-weight:600;padding:6px 10px;border-radius:6px;display:inline-block;margin:4px 0}
.verdict.clean{color:var(--ok);background:color-mix(in srgb,var(--ok) 12%,transparent)}
.verdict.error{color:var(--err);background:color-mix(in srgb,var(--err) 12%,transparent)}
.verdict.warning,.verdict.problem{color:var(--warn);background:color-mix(in srgb,var(--warn) 12%,transparent)}
.verdict.info{color:var(--info);background:color-mix(in srgb,var(--info) 12%,transparent)}
.finding{background:var(--panel);border-left:4px solid var(--info);border-radius:4px;padding:10px 12px;margin:10px 0}
.finding.error{border-color:var(--err)}.finding.warning{border-color:var(--warn)}
.badge{font-size:12px;text-transform:uppercase;padding:1px 6px;border-radius:3px;color:#fff;background:var(--info)}
.badge.error{background:var(--err)}.badge.warning{background:var(--warn)}
.where{color:var(--muted);margin:2px 0}.message{margin:4px 0}
pre.source{background:var(--bg);border:1px solid var(--line);padding:6px 0;overflow-x:auto;margin:6px 0 0}
pre.source>span{display:block;padding:0 8px}pre.source .hit{background:color-mix(in srgb,var(--warn) 22%,transparent)}
pre.source .ln{color:var(--muted);user-select:none}
a{color:var(--info)}
figure.chart{margin:14px 0;padding:8px;background:var(--panel);border-radius:6px}
figure.chart svg{width:100%;height:auto;display:block}
figcaption{font-size:13px;color:var(--muted);margin-top:4px}
svg text{font:11px system-ui,sans-serif;fill:var(--muted)}svg .label{font-size:12px}
.axis path{stroke:var(--muted);fill:none}.axis .grid{stroke:var(--line);stroke-dasharray:2 3}
.series{fill:none;stroke-width:1.6;stroke-linejoin:round}
.s0{stroke:#3b7ddd;fill:#3b7ddd}.s1{stroke:#e07b24;fill:#e07b24}.s2{stroke:#2ca05a;fill:#2ca05a}
.s3{stroke:#c0262d;fill:#c0262d}.s4{stroke:#8a5cc2;fill:#8a5cc2}.s5{stroke:#7a7f8a;fill:#7a7f8a}
path.series{fill:none}.legend path{stroke-width:3}
.bar text{fill:var(--fg)}
.marker path,.finding path,.horizon path,.diverged path,.skip path,.peak path,.capacity path{fill:none}
g.finding path{stroke:var(--err);stroke-dasharray:3 3}g.finding text{fill:var(--err)}
g.diverged path{stroke:#8a5cc2;stroke-width:2}g.diverged text{fill:#8a5cc2}
g.horizon path{stroke:var(--warn);stroke-dasharray:6 4;stroke-width:1.5}g.horizon text{fill:var(--warn)}
g.skip path{stroke:var(--err);stroke-opacity:.7}
g.peak path{stroke:var(--warn);stroke-dasharray:4 3}g.peak text{fill:var(--warn)}
g.capacity path{stroke:var(--err);stroke-dasharray:8 3}g.capacity text{fill:var(--err)}
table{border-collapse:collapse;font-size:13px;width:100%;margin:8px 0}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left}caption{text-align:left;color:var(--muted)}
.missing,.none,footer{color:var(--muted)}.diverged{color:var(--err);font-weight:600}.agree{color:var(--ok)}
footer{margin-top:30px;font-size:12px}
"""
