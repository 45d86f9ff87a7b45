"""Score ``loopcheck check`` against the hand-labelled real-world loops of manifest.jsonl.

    python benchmarks/realworld/extract.py --corpus /work/corpus/realworld
    python benchmarks/realworld/score.py --corpus /work/corpus/realworld \
        --details /tmp/realworld-details.md > /tmp/realworld-scores.md

For every checkout (``<corpus>/<owner>+<name>@<sha12>``, made by extract.py) the labelled files are
checked in one ``loopcheck check --output-format json --no-cache --exit-zero FILE...`` run from the
checkout's root, so project-wide facts can be read the way pre-commit would when it passes changed
files. ``--loopcheck`` sets the command (default ``loopcheck``; e.g. ``"python -m loopcheck"``).

Selection: loopcheck's default selection, as a pre-commit user runs it. No opt-in rule is labelled
(LC110, LC305 and the configured half of LC304 are never selected), and LC206 (a deprecated API
name, not a loop pitfall) is dropped from the findings before scoring.

Matching is per (loop, code). A finding belongs to the labelled loop whose ``lines`` or ``anchors``
range holds its row (the smallest such span when ranges nest); findings in no labelled range are
"unlabelled" and listed apart, outside precision. Per loop: an expected code that is reported is a
TP, one that is not is a FN, a reported code that is neither expected nor ``debatable`` is a FP, and
a reported debatable code is counted apart (neither TP nor FP). Several findings of one code in one
loop count once.

The report gives recall and precision per rule and overall for each split (the readable dev, dev2 and dev3,
then the held-out test, test2 and test3) and for all loops; ``--details`` writes every FN and FP with
its location (of the readable splits only unless ``--details-splits`` names others: test, test2 and
test3 are held out, see README.md), ``--json`` the raw numbers.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
IGNORED_CODES = {"LC206"}
SPLITS = ("dev", "dev2", "dev3", "test", "test2", "test3")
READABLE = ("dev", "dev2", "dev3")  # the splits developers may study; the others are held out


@dataclass
class Loop:
    id: str
    repo: str
    commit: str
    path: str
    lines: tuple[int, int]
    expected: set[str]
    debatable: set[str]
    split: str
    anchors: list[tuple[int, int]] = field(default_factory=list)
    reported: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))

    @property
    def checkout(self) -> str:
        return f"{self.repo.replace('/', '+')}@{self.commit[:12]}"

    def span_holding(self, row: int) -> int | None:
        spans = [(b - a) for a, b in [self.lines, *self.anchors] if a <= row <= b]
        return min(spans) if spans else None

    def where(self) -> str:
        return f"{self.repo}@{self.commit[:12]} {self.path}:{self.lines[0]}-{self.lines[1]}"


def load_manifest(path: Path) -> list[Loop]:
    loops = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        entry = json.loads(line)
        loops.append(
            Loop(
                id=entry["id"],
                repo=entry["repo"],
                commit=entry["commit"],
                path=entry["path"],
                lines=tuple(entry["lines"]),
                expected=set(entry["expected"]),
                debatable=set(entry.get("debatable", {})),
                split=entry["split"],
                anchors=[tuple(a) for a in entry.get("anchors", [])],
            )
        )
    return loops


def run_loopcheck(command: list[str], root: Path, files: list[str]) -> tuple[list[dict], str]:
    argv = [*command, "check", "--output-format", "json", "--no-cache", "--exit-zero", *files]
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        return [], f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}"
    try:
        return json.loads(proc.stdout or "[]"), ""
    except json.JSONDecodeError as exc:
        return [], f"unreadable JSON ({exc}): {proc.stdout[:200]!r}"


def attach(loops: list[Loop], corpus: Path, command: list[str]) -> tuple[list[dict], list[str]]:
    """Run loopcheck per checkout and hang each finding on its loop; return the unlabelled ones."""
    by_checkout: dict[str, list[Loop]] = defaultdict(list)
    for loop in loops:
        by_checkout[loop.checkout].append(loop)
    unlabelled, errors = [], []
    for checkout, members in sorted(by_checkout.items()):
        root = corpus / checkout
        files = sorted({loop.path for loop in members})
        if not root.is_dir():
            errors.append(f"{checkout}: no checkout under {corpus} (run extract.py)")
            continue
        absent = [f for f in files if not (root / f).is_file()]
        if absent:
            errors.append(f"{checkout}: missing {', '.join(absent)}")
        findings, error = run_loopcheck(command, root, [f for f in files if f not in absent])
        if error:
            errors.append(f"{checkout}: loopcheck {error}")
        for finding in findings:
            if finding["code"] in IGNORED_CODES:
                continue
            path = Path(finding["filename"])
            rel = path.relative_to(root).as_posix() if path.is_absolute() else path.as_posix()
            row = finding["location"]["row"]
            holders = [
                (span, loop)
                for loop in members
                if loop.path == rel and (span := loop.span_holding(row)) is not None
            ]
            finding = {**finding, "filename": rel, "checkout": checkout}
            if holders:
                min(holders, key=lambda held: held[0])[1].reported[finding["code"]].append(finding)
            else:
                unlabelled.append(finding)
    return unlabelled, errors


def outcomes(loops: list[Loop]):
    """Yield (loop, code, kind, findings) with kind TP, FN, FP or DEBATABLE."""
    for loop in loops:
        reported = set(loop.reported)
        for code in sorted(loop.expected | reported):
            if code in loop.expected:
                yield loop, code, "TP" if code in reported else "FN", loop.reported.get(code, [])
            elif code in loop.debatable:
                yield loop, code, "DEBATABLE", loop.reported[code]
            else:
                yield loop, code, "FP", loop.reported[code]


def ratio(num: int, den: int) -> str:
    return f"{num / den:.2f}" if den else "—"


def report_splits(loops: list[Loop]) -> list[str]:
    """The splits present, those of SPLITS first (any other split after them by name), then "all"."""
    present = {loop.split for loop in loops}
    return [s for s in SPLITS if s in present] + sorted(present - set(SPLITS)) + ["all"]


def tables(loops: list[Loop]) -> tuple[str, dict]:
    splits = report_splits(loops)
    counts: dict[str, dict[str, Counter]] = {split: defaultdict(Counter) for split in splits}
    for loop, code, kind, _ in outcomes(loops):
        for split in (loop.split, "all"):
            counts[split][code][kind] += 1
            counts[split]["overall"][kind] += 1
    lines, raw = [], {}
    for split in splits:
        members = [loop for loop in loops if split == "all" or loop.split == split]
        total = counts[split]["overall"]
        raw[split] = {code: dict(counter) for code, counter in counts[split].items()}
        lines += [
            f"### {split}: {len(members)} loops, {len({m.repo for m in members})} repositories, "
            f"{sum(len(m.expected) for m in members)} expected findings",
            "",
            f"Overall: recall **{ratio(total['TP'], total['TP'] + total['FN'])}** "
            f"({total['TP']}/{total['TP'] + total['FN']}), precision "
            f"**{ratio(total['TP'], total['TP'] + total['FP'])}** ({total['TP']}/{total['TP'] + total['FP']}), "
            f"debatable reported: {total['DEBATABLE']}",
            "",
            "| rule | expected | TP | FN | FP | debatable | recall | precision |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for code in sorted(c for c in counts[split] if c != "overall"):
            c = counts[split][code]
            lines.append(
                f"| {code} | {c['TP'] + c['FN']} | {c['TP']} | {c['FN']} | {c['FP']} | {c['DEBATABLE']} "
                f"| {ratio(c['TP'], c['TP'] + c['FN'])} | {ratio(c['TP'], c['TP'] + c['FP'])} |"
            )
        lines.append("")
    return "\n".join(lines), raw


def details(loops: list[Loop], unlabelled: list[dict], errors: list[str], splits: set[str]) -> str:
    shown = {loop.checkout for loop in loops if loop.split in splits}
    loops = [loop for loop in loops if loop.split in splits]
    unlabelled = [f for f in unlabelled if f["checkout"] in shown]
    errors = [e for e in errors if e.split(":", 1)[0] in shown]  # a held-out checkout stays unnamed
    out = [f"# Real-world benchmark: every miss and false alarm ({', '.join(sorted(splits))})", ""]
    for kind, title in (("FN", "False negatives"), ("FP", "False positives"), ("DEBATABLE", "Debatable codes reported")):
        rows = [(loop, code, found) for loop, code, k, found in outcomes(loops) if k == kind]
        out += [f"## {title} ({len(rows)})", ""]
        for loop, code, found in rows:
            at = ", ".join(f"{f['location']['row']}: {f['message']}" for f in found)
            out.append(f"- [{loop.split}] {loop.id} {code} {loop.where()}" + (f" — {at}" if at else ""))
        out.append("")
    out += [f"## Unlabelled findings ({len(unlabelled)})", ""]
    out += [
        f"- {f['checkout']} {f['filename']}:{f['location']['row']} {f['code']} {f['message']}" for f in unlabelled
    ]
    if errors:
        out += ["", f"## Errors ({len(errors)})", "", *[f"- {e}" for e in errors]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder of <owner>+<name>@<sha12> checkouts")
    parser.add_argument("--manifest", type=Path, default=HERE / "manifest.jsonl")
    parser.add_argument("--loopcheck", default="loopcheck", help="command that runs loopcheck")
    parser.add_argument("--details", type=Path, help="write every FN, FP and unlabelled finding here")
    parser.add_argument(
        "--details-splits", default=",".join(READABLE),
        help=f"splits listed in --details (comma-separated; default {','.join(READABLE)})"
    )
    parser.add_argument("--json", type=Path, help="write the raw counts here")
    args = parser.parse_args(argv)

    loops = load_manifest(args.manifest)
    unlabelled, errors = attach(loops, args.corpus, shlex.split(args.loopcheck))
    report, raw = tables(loops)
    by_code = Counter(f["code"] for f in unlabelled)
    print(report)
    print(f"Unlabelled findings (outside every labelled range, not in precision): {len(unlabelled)}"
          + (f" ({', '.join(f'{c} {n}' for c, n in sorted(by_code.items()))})" if by_code else ""))
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if args.details:
        args.details.write_text(details(loops, unlabelled, errors, set(args.details_splits.split(","))))
    if args.json:
        args.json.write_text(json.dumps({"splits": raw, "unlabelled": dict(by_code), "errors": errors}, indent=1))
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
