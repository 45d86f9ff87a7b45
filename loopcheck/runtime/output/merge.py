"""One report from the parts that the ranks of a distributed job wrote.

``merge_parts`` is used by rank 0 at exit and by ``loopcheck report merge DIR`` afterwards (for
jobs that crashed or destroyed their process group early). The merged report has the schema of
a single-process report (``REPORT.md``); the top-level ``counters``, ``memory``, ``optimizers``,
``environment`` and ``exit`` are the lowest rank's, each finding carries the ``ranks`` it
occurred on (``count`` summed, ``first_step`` the earliest), and ``distributed`` holds the
per-rank detail and the cross-rank verdicts: step-count agreement, the sampled gradient
consistency (``consistency``) and the ranks that wrote no part."""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from ..checks import consistency

_PART = re.compile(r"^(?P<base>.+)\.rank(?P<rank>\d+)(?P<ext>\.[^.]*)$")


def _world_size(parts: list[dict[str, Any]]) -> int:
    sizes = [p.get("distributed", {}).get("world_size") or 1 for p in parts]
    return max(sizes, default=1)


def merge_parts(parts: list[dict[str, Any]], world_size: int | None = None) -> dict[str, Any]:
    parts = sorted(parts, key=lambda p: p.get("distributed", {}).get("rank", 0))
    world = max(world_size or 1, _world_size(parts))
    ranks = [p.get("distributed", {}).get("rank", 0) for p in parts]
    base = dict(parts[0])
    findings: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rank, part in zip(ranks, parts):
        for f in part.get("findings", []):
            key = (f["code"], f.get("file"), f.get("line"))
            merged = findings.get(key)
            if merged is None:
                findings[key] = dict(f, ranks=[rank])
            else:
                merged["count"] += f.get("count", 1)
                merged["first_step"] = min(merged["first_step"], f.get("first_step", 0))
                if rank not in merged["ranks"]:
                    merged["ranks"].append(rank)
    base["findings"] = sorted(findings.values(), key=lambda f: (f["first_step"], f["code"], f.get("line") or 0))
    base["disabled_checks"] = [f"rank {rank}: {error}" for rank, part in zip(ranks, parts)
                               for error in part.get("disabled_checks", [])]
    base["distributed"] = _verdicts(parts, ranks, world)
    return base


def _verdicts(parts: list[dict[str, Any]], ranks: list[int], world: int) -> dict[str, Any]:
    first = parts[0].get("distributed", {})
    detail = []
    for rank, part in zip(ranks, parts):
        section = part.get("distributed", {})
        detail.append({"rank": rank, "local_rank": section.get("local_rank"), "host": section.get("host"),
                       "exit": part.get("exit"), "optimizer_steps": part["counters"]["optimizer_steps"],
                       "backward_passes": part["counters"]["backward_passes"],
                       "peak_memory_bytes": part.get("memory", {}).get("peak_bytes"),
                       "findings": len(part.get("findings", [])), "ddp": section.get("ddp", []),
                       "series": part.get("series")})
    steps = {str(d["rank"]): d["optimizer_steps"] for d in detail}
    missing = [r for r in range(world) if r not in ranks]
    check = consistency.compare({rank: part.get("distributed", {}).get("consistency", {})
                                 for rank, part in zip(ranks, parts)})
    problems = []
    if missing:
        problems.append(f"rank{'s' if len(missing) > 1 else ''} {_list(missing)} wrote no report "
                        "(crashed, killed, or still running when the merge happened)")
    if len(set(steps.values())) > 1:
        problems.append("ranks disagree on the number of optimizer steps: "
                        + ", ".join(f"rank {r} {n}" for r, n in steps.items()))
    crashed = [d["rank"] for d in detail if (d["exit"] or {}).get("how") not in ("finished", "sys.exit", None)
               or (d["exit"] or {}).get("code")]
    if crashed:
        problems.append(f"rank{'s' if len(crashed) > 1 else ''} {_list(crashed)} did not finish "
                        "cleanly: " + ", ".join(f"rank {d['rank']} {d['exit']['how']}" for d in detail
                                                if d["rank"] in crashed))
    syncs = [part.get("distributed", {}).get("gradient_sync") for part in parts]
    if world >= 2 and len(parts) >= 2 and all(s is not None and not any(s.values()) for s in syncs) \
            and all(d["optimizer_steps"] for d in detail):
        problems.append(f"the {len(parts)} ranks stepped their optimizers without DDP, FSDP or any "
                        "gradient all-reduce: each rank trains its own replica on its own data; wrap "
                        "the model in DistributedDataParallel (or average the gradients)")
    if check["diverged_at_step"] is not None:
        since = (f"; they still agreed at step {check['last_agreeing_step']}"
                 if check["last_agreeing_step"] is not None else "")
        problems.append(f"gradients/parameters of rank{'s' if len(check['diverged_ranks']) > 1 else ''} "
                        f"{_list(check['diverged_ranks'])} differ from rank {ranks[0]}'s at step "
                        f"{check['diverged_at_step']} ({_every(check['every'])}){since}: "
                        "the replicas have diverged")
    return {"merged": True, "world_size": world, "ranks_reported": ranks, "missing_ranks": missing,
            "backend": first.get("backend"), "effective_batch": first.get("effective_batch"),
            "fsdp": first.get("fsdp", {}), "optimizer_steps_per_rank": steps,
            "steps_agree": len(set(steps.values())) <= 1,
            "consistency": check, "problems": problems, "ranks": detail}


def _every(k: int | None) -> str:
    return "sampled every step" if k == 1 else f"sampled every {k} steps"


def _list(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def ranks_label(finding: dict[str, Any], world_size: int) -> str:
    """`` on ranks 0, 1`` / `` on rank 1 only`` for the summary; empty for a single process."""
    ranks = finding.get("ranks")
    if not ranks or world_size < 2:
        return ""
    if len(ranks) == world_size:
        return " on every rank"
    return f" on rank{'s' if len(ranks) > 1 else ''} {_list(sorted(ranks))} only"


def summary_lines(data: dict[str, Any], quiet: bool) -> list[str]:
    """The distributed lines of the human summary (nothing for a single process)."""
    section = data.get("distributed") or {}
    world = section.get("world_size") or 1
    if world < 2:
        return []
    lines = []
    if not quiet:
        if section.get("merged"):
            steps = section["optimizer_steps_per_rank"]
            agree = (f"optimizer steps agree ({next(iter(steps.values()))} on every rank)"
                     if section["steps_agree"] and steps else "")
            lines.append(f"loopcheck: merged report of rank{'s' if len(section['ranks_reported']) > 1 else ''} "
                         f"{_list(section['ranks_reported'])} of {world}"
                         + (f" ({section['backend']})" if section.get("backend") else "")
                         + (f"; {agree}" if agree else ""))
        else:
            lines.append(f"loopcheck: rank {section.get('rank')} of {world}")
        batch = section.get("effective_batch") or {}
        if batch.get("effective_batch"):
            lines.append(f"loopcheck:   effective batch {batch['effective_batch']} = micro-batch "
                         f"{batch['micro_batch']} x {batch['backward_per_step']} backward passes per "
                         f"step x {batch['replicas']} replicas")
        check = section.get("consistency") or {}
        if section.get("merged") and check.get("compared_steps") and check.get("diverged_at_step") is None:
            n = check["compared_steps"]
            lines.append(f"loopcheck:   replicas agree at the {n} sampled step{'s' if n > 1 else ''} "
                         f"({_every(check['every'])})")
    lines += [f"loopcheck:   problem: {problem}" for problem in section.get("problems", [])]
    return lines


# -- loopcheck report merge DIR -----------------------------------------------------------
def add_merge_arguments(actions: Any) -> None:
    """``loopcheck report merge DIR``: one action of ``loopcheck report`` (``loopcheck.report.commands``)."""
    merge = actions.add_parser("merge", help="merge the per-rank parts (NAME.rankN.json) in DIR into NAME.json",
                               description="Merge the per-rank report parts that `loopcheck run --report "
                                           "NAME.json` wrote under torchrun (NAME.rank0.json, NAME.rank1.json, "
                                           "...) into NAME.json and print the merged summary.")
    merge.add_argument("directory", metavar="DIR", help="the folder holding the parts")
    merge.add_argument("--output", "-o", metavar="PATH",
                       help="write the merged report here (only when DIR holds one set of parts)")
    merge.add_argument("--quiet", action="store_true", help="print only the findings and problems")


def find_parts(directory: str) -> dict[str, dict[int, str]]:
    """``{merged path: {rank: part path}}`` for every set of parts in ``directory``."""
    groups: dict[str, dict[int, str]] = {}
    for name in sorted(os.listdir(directory)):
        match = _PART.match(name)
        if match and not name.startswith("."):
            target = os.path.join(directory, match["base"] + match["ext"])
            groups.setdefault(target, {})[int(match["rank"])] = os.path.join(directory, name)
    return groups


def merge_directory(directory: str, output: str | None = None, quiet: bool = False) -> int:
    from .report import write_report_atomically
    from .summary import render_summary

    if not os.path.isdir(directory):
        print(f"loopcheck report merge: {directory!r} is not a directory", file=sys.stderr)
        return 2
    groups = find_parts(directory)
    if not groups:
        print(f"loopcheck report merge: no report parts (NAME.rankN.json) in {directory}", file=sys.stderr)
        return 1
    if output and len(groups) > 1:
        print(f"loopcheck report merge: {directory} holds {len(groups)} sets of parts; --output needs one",
              file=sys.stderr)
        return 2
    for target, files in groups.items():
        parts = []
        for rank, path in sorted(files.items()):
            try:
                with open(path, encoding="utf-8") as handle:
                    parts.append(json.load(handle))
            except (OSError, ValueError) as exc:
                print(f"loopcheck report merge: skipping {path}: {exc}", file=sys.stderr)
        if not parts:
            continue
        merged = merge_parts(parts)
        destination = output or target
        write_report_atomically(destination, merged)
        sys.stderr.write(f"loopcheck: merged {len(parts)} part{'s' if len(parts) > 1 else ''} into {destination}\n")
        sys.stderr.write(render_summary(merged, quiet))
    return 0
