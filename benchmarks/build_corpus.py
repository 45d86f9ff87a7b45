"""Extract fetched repositories into a corpus directory outside any git checkout.

The search tool's ``fetch`` leaves bare git directories under ``/work/.mirror/OWNER+NAME/repo``.
This writes the tree of one commit of each (HEAD unless the list names another) to
``DEST/OWNER+NAME``, leaving out the blobs the snapshot lacks (files of 4 MiB and more) and
symbolic links, and prints the manifest to commit: ``OWNER/NAME COMMIT`` per line. A corpus
outside git matters: ``.gitignore``-respecting tools would skip one inside an ignored folder.

    python benchmarks/build_corpus.py /work/corpus/broad < benchmarks/results/broad-corpus-repos.txt

stdin: one ``OWNER/NAME [REV]`` per line; ``#`` starts a comment.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from pathlib import Path


def _git(gitdir: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], input=data, capture_output=True,
                          check=True).stdout


def extract(gitdir: Path, commit: str, target: Path) -> int:
    """Write the blobs of ``commit`` under ``target``; the number of files written."""
    entries = []
    for record in _git(gitdir, "ls-tree", "-r", "-z", commit).split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode in (b"100644", b"100755"):
            entries.append((sha.decode(), os.fsdecode(path)))
    shas = "".join(f"{sha}\n" for sha, _ in entries).encode()
    proc = subprocess.Popen(["git", f"--git-dir={gitdir}", "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    # Fed from a thread: cat-file answers while it reads, and a full pipe would block both ends.
    feeder = threading.Thread(target=lambda: (proc.stdin.write(shas), proc.stdin.close()))  # type: ignore[union-attr]
    feeder.start()
    written = 0
    for _, path in entries:
        header = proc.stdout.readline().split()
        if header[1] == b"missing":
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)  # the newline after each object
        out = target / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        written += 1
    feeder.join()
    proc.wait()
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args()
    for line in sys.stdin:
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        repo, rev = fields[0], fields[1] if len(fields) > 1 else "HEAD"
        gitdir = args.mirrors / repo.replace("/", "+") / "repo"
        commit = _git(gitdir, "rev-parse", f"{rev}^{{commit}}").decode().strip()
        target = args.dest / repo.replace("/", "+")
        if not target.is_dir():
            partial = target.with_name(target.name + ".partial")
            extract(gitdir, commit, partial)
            partial.rename(target)
        print(repo, commit, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
