"""Extract every repo@commit of the manifest from fetched mirrors into a corpus folder.

    python benchmarks/realworld/extract.py --corpus /work/corpus/realworld

The mirrors are the bare git directories that the search tool's ``fetch`` brings
(``/work/.mirror/<owner>+<name>/repo`` by default, ``--mirrors`` to change it); this script only
writes the commit's Python sources and project configuration (``*.py``, ``*.pyi``, ``*.toml``,
``*.cfg``, ``*.ini``) with ``git cat-file`` (a snapshot lacks its files of 4 MiB and more, so a
plain ``git archive`` fails on some). Each checkout lands in ``<corpus>/<owner>+<name>@<sha12>``,
the folder name ``score.py`` expects. Checkouts that already exist are kept. Keep the corpus
outside any git repository (a ``.gitignore``-respecting tool would skip it) and never commit it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def checkout_name(repo: str, commit: str) -> str:
    return f"{repo.replace('/', '+')}@{commit[:12]}"


def git_dir(mirrors: Path, repo: str) -> Path | None:
    root = mirrors / repo.replace("/", "+")
    for candidate in (root / "repo", root):
        if (candidate / "HEAD").is_file() or (candidate / "objects").is_dir():
            return candidate
    return None


SUFFIXES = (".py", ".pyi", ".toml", ".cfg", ".ini")


def extract(git: Path, commit: str, dest: Path) -> None:
    listing = subprocess.run(
        ["git", f"--git-dir={git}", "ls-tree", "-r", "-z", commit], capture_output=True, check=True
    ).stdout.decode()
    blobs = []
    for record in filter(None, listing.split("\0")):
        meta, path = record.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and mode != "120000" and path.endswith(SUFFIXES):
            blobs.append((sha, path))
    partial = dest.with_name(dest.name + ".part")
    partial.mkdir(parents=True, exist_ok=True)
    batch = subprocess.run(
        ["git", f"--git-dir={git}", "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in blobs).encode(), capture_output=True, check=True,
    ).stdout
    offset = 0
    for sha, path in blobs:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        target = partial / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[offset : offset + size])
        offset += size + 1
    partial.rename(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=HERE / "manifest.jsonl")
    parser.add_argument("--corpus", type=Path, required=True, help="folder that receives the checkouts")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args(argv)

    wanted = {}
    for line in args.manifest.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            wanted[(entry["repo"], entry["commit"])] = None
    missing = 0
    for repo, commit in wanted:
        dest = args.corpus / checkout_name(repo, commit)
        if dest.is_dir():
            continue
        git = git_dir(args.mirrors, repo)
        if git is None:
            print(f"no mirror for {repo} under {args.mirrors} (fetch it first)", file=sys.stderr)
            missing += 1
            continue
        print(f"extracting {repo}@{commit[:12]}", file=sys.stderr)
        extract(git, commit, dest)
    print(f"{len(wanted) - missing} of {len(wanted)} checkouts in {args.corpus}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
