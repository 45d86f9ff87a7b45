"""The parts of README.md that benchmarks/fresh_clone.sh runs, as the README writes them.

    python benchmarks/readme_parts.py README.md quickstart      # the quickstart command
    python benchmarks/readme_parts.py README.md tests           # the test command
    python benchmarks/readme_parts.py README.md precommit REPO REV   # the snippet for REPO at REV
    python benchmarks/readme_parts.py README.md actions REPO REV     # the workflow's install and
                                                                     # loopcheck steps, one a line

The README pins the project's published URL and a commit; ``REPO`` and ``REV`` replace them (a
local clone and its HEAD), nothing else is changed. Standard library only: it runs before any
virtual environment exists.
"""

from __future__ import annotations

import re
import sys


def first_command(text: str, section: str) -> str:
    return re.search(r"```console\n\$ (.*?)\n", text.split(section, 1)[1]).group(1)  # type: ignore[union-attr]


def precommit(text: str, repo: str, rev: str) -> str:
    snippet = re.search(r"### pre-commit\n\n```yaml\n(.*?)```", text, re.DOTALL).group(1)  # type: ignore[union-attr]
    snippet = re.sub(r"repo: \S+", f"repo: {repo}", snippet)
    return re.sub(r"rev: \S+", f"rev: {rev}", snippet)


def actions(text: str, repo: str, rev: str) -> list[str]:
    workflow = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "upload-sarif" in b)
    runs = re.findall(r"^\s+(?:- )?run: (.*)$", workflow, re.MULTILINE)
    # `git+file://localhost/path`, not `git+file:///path`: pip refuses a VCS URL without a host
    # ("Invalid requirement"), and git reads localhost as this machine.
    return [re.sub(r"git\+\S+?@[0-9a-f]{40}", f"git+file://localhost{repo}@{rev}", run)
            for run in runs if run.startswith(("pip install", "loopcheck "))]


def main(argv: list[str]) -> int:
    text = open(argv[1], encoding="utf-8").read()
    what = argv[2]
    if what == "quickstart":
        print(first_command(text, "## Quickstart"))
    elif what == "tests":
        print(first_command(text, "## Development and tests"))
    elif what == "precommit":
        print(precommit(text, argv[3], argv[4]), end="")
    elif what == "actions":
        print("\n".join(actions(text, argv[3], argv[4])))
    else:
        raise SystemExit(f"unknown part {what!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
