"""The rule catalogue pages under ``rules/``, generated from each rule's docstring and examples.

``python -m loopcheck.catalogue_pages`` rewrites them; a test fails when one is stale, so the
pages, ``loopcheck rule LC101`` and the executed examples can never disagree.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from loopcheck.catalog import CODES, FILE_CODES, INVALID_SUPPRESSION, NOT_ANALYSED, SYNTAX_ERROR
from loopcheck.latent import ACCUMULATION_RULES
from loopcheck.rules import RULES, Rule

PAGES = Path(__file__).resolve().parent.parent / "rules"


# Codes about a whole file rather than a training loop: always reported, no rule behind them.
_FILE_PAGES = {
    SYNTAX_ERROR.code: """## What it does
Reports a file that Python cannot parse, with Python's own message and position
(`syntax error: expected ':'`). The other files are still checked.

## Which files are parsed
Only files whose text can hold something a selected rule looks for (`backward(`, `loss_scaler(`,
`cuda.amp`, `no_sync`, ...): a syntax error in any other file is left to Python, ruff or your
editor. A file nested beyond the limits of Python's own parser (`too many nested parentheses`) is
a syntax error too: Python refuses to run it.

## Scripts written for torch < 0.4
Before torch 0.4, `non_blocking=True` was spelled `async=True` (`target.cuda(async=True)`), and
`async` is a keyword since Python 3.7. When that word, assigned (`async=`), is all that keeps
a file from parsing, the syntax error is still reported (the file does not run on Python >= 3.7),
and the rest of the file is checked as if it were a name: its other findings are reported too,
without fixes.

## Fix
Fix the syntax error; until then loopcheck cannot see the file's training loops. For `async=True`,
write `non_blocking=True` (torch >= 0.4).
""",
    NOT_ANALYSED.code: """## What it does
Reports a file that loopcheck did not analyse although Python accepts it, and why:
- libcst, the parser loopcheck uses, refuses it (some mixes of tabs and spaces in indentation);
- it is nested too deeply for Python's own parser (an expression of thousands of terms);
- checking it crashed the checking process, or took longer than 60 seconds (it was stopped);
- loopcheck failed on it (a bug in loopcheck: please report it with the file).

It is a notice about loopcheck, not a problem in the file: it never makes the run fail, and the
other files are still checked. The file is checked again on the next run (it is not cached).

## Fix
Nothing is wrong with the file. Re-indenting it consistently (spaces only) lets libcst parse it.
""",
    INVALID_SUPPRESSION.code: """## What it does
Reports a code in a suppression comment that is not a loopcheck code (`# noqa: LC10l`,
`# loopcheck: ignore[zero-grad-in-acumulation]`), with the code it most likely meant. Such a
comment silences nothing, so the finding it was meant for is still reported. Codes of other
tools (`# noqa: E501`) are left alone.

## Fix
Correct the code, or remove the comment.
""",
}


# The rules whose findings hold only where the loop accumulates (``loopcheck.latent``)
_SETTING_SECTION = """## When the window count is a setting
The finding holds only where the loop accumulates (N > 1). Where N is a configuration value
(`args.gradient_accumulation_steps`, `cfg.training.accum_steps`), the message ends with
"(only when `args.gradient_accumulation_steps` > 1; its default is 1)", the default where the file
shows it. A configuration key that everything the project ships leaves inert is not reported: its
last name is found with a value at least once (in the project's YAML, JSON, TOML and INI files,
shell scripts, READMEs and notebooks, or as a Python default such as a yacs
`_C.TRAIN.ACCUMULATION_STEPS = 0`), every value found is 0, 1, null or false, and no command-line
option sets it (an argparse `--accumulation-steps`, a value copied from an option). A key that a
shipped config, launch script or README command sets above 1, that an option sets, that a document
mentions without a value, or that is found nowhere keeps the finding, and so does every key of a
project whose options are not all written out (a parser that makes options of dataclass fields, such
as `HfArgumentParser` with transformers' `TrainingArguments`, or of a config's keys)."""


def page_name(code: str) -> str:
    return f"{code}-{(CODES.get(code) or FILE_CODES[code]).name}.md"


def render_page(code: str, rule: type[Rule] | None) -> str:
    if code in FILE_CODES:
        info = FILE_CODES[code]
        return "\n".join([f"# {code} {info.name}", "", f"Level: **{info.level.value}** · about a whole file, always "
                          "reported (not a rule: it cannot be selected or ignored)", "", _FILE_PAGES[code]])
    info = CODES[code]
    static = "static (opt-in: `--extend-select " + code + "`)" if info.static_opt_in else "static"
    where = ", ".join(w for w, on in ((static, rule is not None), ("runtime", info.runtime)) if on)
    lines = [f"# {code} {info.name}", "", f"Level: **{info.level.value}** · checked: {where or 'not yet'}", ""]
    if rule is None:
        lines += ["## What it does", f"Reports that {info.summary}.", "",
                  "Detected by the runtime checker (`loopcheck run`) only: the problem depends on values "
                  "that the source code does not show.", ""]
        return "\n".join(lines)
    lines += [textwrap.dedent(sys.modules[rule.__module__].__doc__ or "").strip(), ""]
    lines += ["## Fix availability",
              "`loopcheck check --fix` applies the fix above where the model is certain enough (it moves, "
              "inserts or rewrites only the flagged statements; fixes that may change more than the finding "
              "need `--unsafe-fixes`); elsewhere the finding is reported without a fix." if rule.fixable else "No automatic fix: the right change depends on intent.", ""]
    if code in ACCUMULATION_RULES:
        lines += [_SETTING_SECTION, ""]
    lines += ["## Example", "```python", textwrap.dedent(rule.INVALID[0]).strip(), "```", "",
              "Use instead:", "```python", textwrap.dedent(rule.VALID[0]).strip(), "```", ""]
    if len(rule.INVALID) > 1:
        lines += ["## More flagged code", ""]
        for example in rule.INVALID[1:]:
            lines += ["```python", textwrap.dedent(example).strip(), "```", ""]
    if len(rule.VALID) > 1:
        lines += ["## Not flagged", ""]
        for example in rule.VALID[1:]:
            lines += ["```python", textwrap.dedent(example).strip(), "```", ""]
    lines += ["## Suppression", f"`# noqa: {code}` or `# loopcheck: ignore[{info.name}]` on the flagged line.", ""]
    return "\n".join(lines)


def expected_pages() -> dict[str, str]:
    return {page_name(code): render_page(code, RULES.get(code)) for code in [*FILE_CODES, *CODES]}


def write_pages(directory: Path = PAGES) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_pages().items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_pages():
        print(f"wrote {path}")
