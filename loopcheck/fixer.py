"""``--fix`` and ``--diff``: apply the rules' fixes to a file's text, and to files on disk.

The fixes of one analysis that touch different parts of the file are applied together, and the
result is checked once, with every rule whatever the selection: the file must still compile, the
fixed findings must be gone and no other finding may appear. When that check fails the fixes are
tried one at a time, and each one that fails alone is rolled back and reported as not applied.
Analysing again after a batch also finds what the batch left (fixes whose edits overlapped), so the
driver runs to a fixed point; a fix is tried at most once per finding it was made for.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.catalog import NOT_ANALYSED, SYNTAX_ERROR
from loopcheck.config import Config, Options
from loopcheck.engine import LazyProject, analyse, check_text, read_source_and_encoding, text_tests, wanted

if TYPE_CHECKING:
    import libcst as cst

    from loopcheck.cache import Cache
    from loopcheck.findings import Finding
    from loopcheck.fixes import Fix


@dataclass(frozen=True)
class NotApplied:
    finding: Finding
    reason: str

    def describe(self) -> str:
        f = self.finding
        return f"{f.filename}:{f.line}:{f.col}: {f.code} fix not applied: {self.reason}"


@dataclass
class Fixed:
    source: str
    applied: int = 0  # findings fixed
    not_applied: list[NotApplied] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # of every rule, in the fixed source
    project: str | None = None  # the digest of the project facts the last check used (the cache's)


def _every_code() -> frozenset[str]:
    from loopcheck.rules import RULES

    return frozenset(RULES)


def fix_text(source: str, filename: str, codes: frozenset[str], unsafe: bool = False,
             options: Options = Options(), project: LazyProject | None = None) -> Fixed:
    """``source`` with every applicable fix of ``codes`` applied and checked; ``project``: the facts
    of the other modules of the file's project, read as the check reads them (a finding that rests on
    them, such as a zeroing inside an imported helper, is found and kept by the fixed file's check)."""
    every = _every_code()
    module, results = analyse(source, filename, every, options, project)
    out = Fixed(source)
    if module is None and any(f.code == NOT_ANALYSED.code for f, _ in results):
        return _unfixable(source, filename, every, codes, unsafe, options, results[0][0], project)
    # Every accepted batch lowers the number of findings, and a fix that failed is not tried again
    # for the same finding (identical findings, by code and fingerprint, are counted).
    failed: Counter[tuple[str, str]] = Counter()
    one_at_a_time = False
    while module is not None:
        present = Counter(_key(f) for f, _ in results)
        todo = [(f, fix) for f, fix in results if _wanted(f, fix, codes, unsafe) and failed[_key(f)] < present[_key(f)]]
        if not todo:
            break
        groups = _independent(todo)
        if one_at_a_time:
            groups = groups[:1]
        candidate = _apply(module, groups)
        verdict = _verify(candidate, filename, every, options, results, groups, project) if candidate is not None else \
            "an edit could not be made"
        if isinstance(verdict, str):
            if len(groups) > 1:  # find the culprits one fix at a time
                one_at_a_time = True
                continue
            for finding, _ in groups[0]:
                failed[_key(finding)] += 1
                out.not_applied.append(NotApplied(finding, verdict))
            continue
        module, results = verdict
        out.source = candidate  # type: ignore[assignment]
        out.applied += sum(len(g) for g in groups)
    out.findings = [f for f, _ in results]
    out.project = project.digest if project is not None else None
    return out


def _unfixable(source: str, filename: str, every: frozenset[str], codes: frozenset[str], unsafe: bool,
               options: Options, notice: Finding, project: LazyProject | None) -> Fixed:
    """A file the check analyses (from Python's ``ast``) but libcst, which makes the fixes, cannot
    parse: its findings, each fix not applied and why."""
    findings = check_text(source, filename, every, options, project)
    digest = project.digest if project is not None else None
    if any(f.code == NOT_ANALYSED.code for f in findings):
        return Fixed(source, findings=[notice], project=digest)
    reason = notice.message.removeprefix("not analysed: ")
    return Fixed(source, findings=findings, project=digest,
                 not_applied=[NotApplied(f, reason) for f in findings if f.fixable and (f.fix_safe or unsafe)
                              and f.code in codes])


def _key(finding: Finding) -> tuple[str, str]:
    return finding.code, finding.fingerprint


def _wanted(finding: Finding, fix: Fix | None, codes: frozenset[str], unsafe: bool) -> bool:
    return fix is not None and finding.code in codes and (fix.safe or unsafe)


Group = list[tuple["Finding", "Fix"]]


def _independent(todo: list[tuple[Finding, Fix]]) -> list[Group]:
    """The fixes to apply together: one per set of identical edits (two findings of the same
    statement share a fix), and none whose edits overlap another's (the rest wait for the next
    round). A statement removed or replaced owns everything inside it; statements inserted next to
    the same anchor do not clash."""
    from loopcheck.model.syntax import walk

    groups: dict[tuple[object, ...], Group] = {}
    for finding, fix in todo:
        groups.setdefault(_edit_key(fix), []).append((finding, fix))
    owned: set[int] = set()
    anchors: set[int] = set()
    chosen = []
    for group in groups.values():
        fix = group[0][1]
        mine: set[int] = set()
        near: set[int] = set()
        for edit in fix.edits:
            if edit.remove or edit.replacement is not None:
                mine.update(id(n) for n in walk(edit.target, into_functions=True))
            else:
                near.add(id(edit.target))
        if mine & (owned | anchors) or near & owned:
            continue
        owned |= mine
        anchors |= near
        chosen.append(group)
    return chosen


def _edit_key(fix: Fix) -> tuple[object, ...]:
    from loopcheck.model.syntax import source

    return tuple((id(e.target), e.remove, source(e.replacement) if e.replacement is not None else None,
                  tuple(source(s) for s in e.before), tuple(source(s) for s in e.after)) for e in fix.edits)


def _apply(module: cst.Module, groups: list[Group]) -> str | None:
    from loopcheck.fixes import Unapplied, apply_edits

    try:
        return apply_edits(module, [e for g in groups for e in g[0][1].edits]).code
    except Unapplied:
        return None


# Findings a fix can reveal rather than introduce: once gradients are no longer zeroed on every
# micro-batch (LC101), windows exist, and the last one of an epoch may be partial (LC105).
_REVEALS = {"LC101": frozenset({"LC105"})}


def _verify(candidate: str, filename: str, every: frozenset[str], options: Options,
            before: list[tuple[Finding, Fix | None]], groups: list[Group], project: LazyProject | None = None
            ) -> str | tuple[cst.Module | None, list[tuple[Finding, Fix | None]]]:
    """The fixed file's module (None: no rule has anything left to look at) and findings, or why
    the fixes must be rolled back."""
    try:
        compile(candidate, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return "the fixed code would not compile"
    module, after = analyse(candidate, filename, every, options, project)
    if module is None and after:
        return "the fixed code could not be analysed"  # libcst cannot parse what Python can
    fixed = Counter(f.code for g in groups for f, _ in g)
    old = Counter(f.code for f, _ in before)
    new = Counter(f.code for f, _ in after)
    for code, count in fixed.items():
        if new[code] > old[code] - count:
            return "the finding is still reported after the fix"
    old_keys = Counter(_key(f) for f, _ in before if f.code not in fixed)
    old_lines = Counter((f.code, f.line) for f, _ in before if f.code not in fixed)
    for finding, _ in after:
        if finding.code in fixed:
            continue
        if old_keys[_key(finding)] > 0:
            old_keys[_key(finding)] -= 1
            old_lines[finding.code, finding.line] -= 1
        elif old_lines[finding.code, finding.line] > 0:
            old_lines[finding.code, finding.line] -= 1  # the fix rewrote the statement it points at
        elif any(finding.code in _REVEALS.get(code, ()) for code in fixed):
            continue  # the fixed finding hid it: the code had the pitfall already
        else:
            return f"it would introduce {finding.code} ({finding.name}) at line {finding.line}"
    return module, after


# -- files ----------------------------------------------------------------------------------------


@dataclass
class FixReport:
    applied: int = 0
    diffs: list[str] = field(default_factory=list)
    not_applied: list[NotApplied] = field(default_factory=list)
    # name -> (text, findings) of every file the fixes analysed: the check that follows needs
    # not analyse them again
    known: dict[str, tuple[str, list[Finding]]] = field(default_factory=dict)

    def write_not_applied(self, stream: object = None) -> None:
        out = stream or sys.stderr
        for item in self.not_applied:
            out.write(item.describe() + "\n")  # type: ignore[attr-defined]
        if self.not_applied:
            n = len(self.not_applied)
            out.write(f"{n} fix{'es' if n != 1 else ''} not applied: applying "  # type: ignore[attr-defined]
                      f"{'them' if n != 1 else 'it'} would have broken or changed the code (see above).\n")


_PARALLEL_FROM = 16  # files to fix; below this a second process costs more than it saves

# source, display name, codes, unsafe fixes, options, path, project facts cache directory
Job = tuple[str, str, frozenset[str], bool, Options, str, "Path | None"]


def fix_files(files: list[Path], codes: frozenset[str], config: Config, write: bool, unsafe: bool,
              jobs: int | None = None, cache: Cache | None = None) -> FixReport:
    """Apply fixes file by file: write them back (``write``) and/or collect unified diffs.

    A file whose cached findings have nothing to fix is not analysed at all; the others are fixed
    in several processes when there are enough of them. The fixes' last check of each file is its
    check: it goes into the cache and into ``FixReport.known``."""
    import difflib

    from loopcheck.checker import _display, _ignored, _per_file_ignores

    per_file = _per_file_ignores(config)
    tests = cache.text_tests(codes, lambda: text_tests(codes)) if cache else text_tests(codes)
    todo: list[tuple[Path, str, str, frozenset[str]]] = []
    for file in files:
        try:
            source, encoding = read_source_and_encoding(file)
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue  # reported by the check that follows
        if not wanted(source, tests):
            continue
        name = _display(file)
        file_codes = codes - _ignored(file, config.root, per_file)
        cached = cache.get(cache.key(name, file_codes, source), name) if cache is not None else None
        if cached is not None and not any(f.fixable and (f.fix_safe or unsafe) for f in cached):
            continue
        todo.append((file, encoding, source, file_codes))
    report = FixReport()
    if "loopcheck.project" in sys.modules:
        sys.modules["loopcheck.project"].forget()  # files may have changed since an earlier run in this process
    project_dir = cache.project_directory if cache is not None else None
    work: list[Job] = [(source, _display(file), file_codes, unsafe, config.options, str(file), project_dir)
                       for file, _, source, file_codes in todo]
    for (file, encoding, source, file_codes), result in zip(todo, _run(work, jobs)):
        name = _display(file)
        report.not_applied += result.not_applied
        if write or not result.applied:  # the findings are those of the text on disk
            findings = [f for f in result.findings if f.code in file_codes or f.code in (SYNTAX_ERROR.code,
                                                                                         NOT_ANALYSED.code)]
            report.known[name] = (result.source, findings)
            if cache is not None:
                cache.put(cache.key(name, file_codes, result.source), findings, result.project)
        if not result.applied or result.source == source:
            continue
        report.applied += result.applied
        report.diffs.append("".join(difflib.unified_diff(source.splitlines(True), result.source.splitlines(True),
                                                         f"a/{name}", f"b/{name}")))
        if write:
            file.write_bytes(result.source.encode(encoding))
    return report


def _fix_job(job: Job) -> Fixed:
    source, name, codes, unsafe, options, path, project_dir = job
    return fix_text(source, name, codes, unsafe, options, LazyProject(path, project_dir))


def _run(work: list[Job], jobs: int | None) -> list[Fixed]:
    from loopcheck.checker import _cores

    workers = min(jobs or min(_cores(), 8), len(work))
    if workers > 1 and len(work) >= _PARALLEL_FROM:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(_fix_job, work))
    return [_fix_job(job) for job in work]
