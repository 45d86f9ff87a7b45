"""Re-run real third-party training programs under ``loopcheck run``: each as shipped (no finding
expected) and with each injected pitfall of ``manifest.toml`` (the finding expected at its line).

    python benchmarks/realscripts/run.py CHECKOUTS [--program NAME ...] [--variant ID ...] [--shipped-only]
        [--jobs 2] [--json results.json] [--markdown results.md]

CHECKOUTS holds the programs' repositories extracted at the manifest's commits, one folder per
repository named ``owner+name`` (``git --git-dir=MIRROR archive COMMIT | tar -x -C CHECKOUTS/owner+name``).
Nothing is fetched or downloaded: each run copies the files it needs into a temporary folder,
applies the injection's diff there, writes synthetic data (tiny configurations, random data in
the formats the programs read) and runs the program on the CPU. The loopcheck that runs is the
one importable by this Python. As-shipped programs also run under plain python, to compare exit
codes."""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


# ---- synthetic data, one writer per program (random data in the format the program reads) ----

def _tokens(path: Path, count: int, vocab: int) -> None:
    import numpy as np

    np.random.default_rng(0).integers(0, vocab, count, dtype=np.uint16).tofile(path)


def data_nanogpt(work: Path) -> None:
    folder = work / "data" / "synthetic"
    folder.mkdir(parents=True)
    _tokens(folder / "train.bin", 20000, 64)
    _tokens(folder / "val.bin", 4000, 64)
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 64}, f)


def data_mnist(work: Path) -> None:
    """The four IDX files torchvision's MNIST reads (present, so nothing is downloaded)."""
    import numpy as np

    raw = work / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 96), ("t10k", 32)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            bytes([0, 0, 8, 3]) + np.array([n, 28, 28], ">i4").tobytes() + images.tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            bytes([0, 0, 8, 1]) + np.array([n], ">i4").tobytes() + labels.tobytes())


def data_time_sequence(work: Path) -> None:
    """generate_sine_wave.py's format (a float64 numpy array of shifted sines), 12 x 120."""
    work = work / "time_sequence_prediction"
    import numpy as np
    import torch

    rng = np.random.default_rng(2)
    x = np.arange(120) + rng.integers(-80, 80, 12).reshape(12, 1)
    torch.save(np.sin(x / 20.0).astype("float64"), work / "traindata.pt")


def data_word_language_model(work: Path) -> None:
    import random

    rng = random.Random(0)
    words = [f"w{i}" for i in range(50)]
    folder = work / "word_language_model" / "synthetic"
    folder.mkdir()
    for split, lines in (("train", 60), ("valid", 12), ("test", 12)):
        text = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(lines))
        (folder / f"{split}.txt").write_text(text + "\n")


def _images(folder: Path, count: int, size: int, classes: int = 2) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        (folder / f"class{c}").mkdir(parents=True)
        for i in range(count // classes):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"class{c}" / f"{i}.png")


def data_timm(work: Path) -> None:
    _images(work / "images" / "train", 32, 32)
    _images(work / "images" / "validation", 8, 32)


def data_ddpm(work: Path) -> None:
    _images(work / "images", 100, 16, classes=1)  # the Trainer asks for 100 or more


DATA = {"nanogpt": data_nanogpt, "mnist": data_mnist, "time_sequence": data_time_sequence,
        "word_language_model": data_word_language_model, "timm": data_timm, "ddpm": data_ddpm}


# ---- one run ----

def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1",
               WANDB_MODE="disabled", LOOPCHECK_REALSCRIPTS_FRAMEWORKS=str(ROOT / "runtime" / "frameworks"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE / "site"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run_variant(program: dict, checkouts: Path, injection: dict | None, plain: bool) -> dict:
    repo = checkouts / program["repo"].replace("/", "+")
    with tempfile.TemporaryDirectory(prefix=f"realscript-{program['name']}-") as tmp:
        work = Path(tmp) / "src"
        for rel in program.get("drivers", []):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(HERE / "drivers" / Path(rel).name, work / rel)
        for rel in program["files"]:
            source, target = repo / rel, work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
        if injection is not None:
            diff = (HERE / injection["diff"]).read_text()
            patched = subprocess.run(["patch", "-p1", "--no-backup-if-mismatch", "-d", str(work)],
                                     input=diff, text=True, capture_output=True)
            if patched.returncode != 0:
                return {"error": f"patch failed: {patched.stdout}{patched.stderr}"}
            for want in injection["expect"]:
                lines = (work / want["file"]).read_text().splitlines()
                if len(lines) < want["line"] or lines[want["line"] - 1].strip() != want["text"]:
                    return {"error": f"{want['file']}:{want['line']} is not {want['text']!r}"}
        if program.get("data"):
            DATA[program["data"]](work)
        cwd = work / program.get("cwd", ".")
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "loopcheck", "run", "--report", str(report), *program["command"]]
        env = _env(program.get("env", {}))
        if program.get("pythonpath"):
            env["PYTHONPATH"] += os.pathsep + str(work / program["pythonpath"])
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=program.get("timeout", 600))
            code, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, err = "timeout", str(exc.stderr or "")
        result = {"exit_code": code, "seconds": round(time.perf_counter() - start, 1),
                  "report": json.loads(report.read_text()) if report.exists() else None,
                  "stderr_tail": err[-3000:]}
        if plain:
            done = subprocess.run([sys.executable, *program["command"]], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=program.get("timeout", 600))
            result["plain_exit_code"] = done.returncode
        for finding in (result["report"] or {}).get("findings", []):
            if finding.get("file"):
                path = Path(finding["file"])
                finding["file"] = str(path.relative_to(work)) if path.is_relative_to(work) else path.name
        return result


def judge(result: dict, expected: list[dict]) -> dict:
    """found: an accepted code at the expected file:line; elsewhere: an accepted code at another
    line; missed: neither. Other findings are listed as they are."""
    if "error" in result:  # the injection did not apply: no verdict
        return {"verdicts": ["error"] * len(expected), "others": [result["error"]]}
    findings = (result.get("report") or {}).get("findings", [])
    verdicts = []
    for want in expected:
        codes = set(want["code"].split("|"))
        here = [f for f in findings if f["code"] in codes and f["file"] == want["file"] and f["line"] == want["line"]]
        near = [f for f in findings if f["code"] in codes]
        verdicts.append("found" if here else "elsewhere" if near else "missed")
    accepted = {(c, w["file"], w["line"]) for w in expected for c in w["code"].split("|")}
    others = [f"{f['code']} {f['file']}:{f['line']}" for f in findings
              if (f["code"], f["file"], f["line"]) not in accepted]
    return {"verdicts": verdicts, "others": others}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", type=Path)
    parser.add_argument("--program", action="append", help="only these programs (repeatable)")
    parser.add_argument("--variant", action="append", help="only these injections (repeatable; 'shipped' for the unmodified run)")
    parser.add_argument("--shipped-only", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the raw results here")
    parser.add_argument("--markdown", type=Path, help="write the results table here")
    args = parser.parse_args(argv)
    manifest = tomllib.loads((HERE / "manifest.toml").read_text())
    programs = [p for p in manifest["program"] if not args.program or p["name"] in args.program]
    jobs = []
    for program in programs:
        if not args.variant or "shipped" in args.variant:
            jobs.append((program, None))
        if not args.shipped_only:
            jobs += [(program, injection) for injection in program.get("injection", [])
                     if not args.variant or injection["id"] in args.variant]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_variant, p, args.checkouts, i, i is None) for p, i in jobs]
        rows = []
        for (program, injection), future in zip(jobs, futures):
            result = future.result()
            expected = injection["expect"] if injection else []
            row = {"program": program["name"], "variant": injection["id"] if injection else "shipped",
                   "expected": expected, **judge(result, expected),
                   **{k: v for k, v in result.items() if k != "report"},
                   "counters": (result.get("report") or {}).get("counters")}
            rows.append(row)
            print(f"{row['program']:22} {row['variant']:34} exit {row.get('exit_code')!s:4} "
                  f"{' '.join(row['verdicts']) or '-':10} others: {', '.join(row['others']) or '-'}",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(rows, programs))
    return 0


def markdown(rows: list[dict], programs: list[dict]) -> str:
    lines = ["| program | repository @ commit | injections | found | elsewhere | missed | findings as shipped |",
             "|---|---|---|---|---|---|---|"]
    totals = [0, 0, 0, 0, 0]
    for program in programs:
        mine = [r for r in rows if r["program"] == program["name"]]
        verdicts = [v for r in mine if r["variant"] != "shipped" for v in r["verdicts"]]
        shipped = [o for r in mine if r["variant"] == "shipped" for o in r["others"]]
        counts = [len(verdicts), verdicts.count("found"), verdicts.count("elsewhere"), verdicts.count("missed"),
                  len(shipped)]
        totals = [t + c for t, c in zip(totals, counts)]
        lines.append(f"| {program['name']} | {program['repo']} @ {program['commit'][:12]} | {counts[0]} | {counts[1]} | "
                     f"{counts[2]} | {counts[3]} | {', '.join(shipped) or 'none'} |")
    lines.append(f"| **all** | | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | {totals[4]} |")
    lines += ["", "| program | variant | expected | verdict | other findings | exit (python / loopcheck) |",
              "|---|---|---|---|---|---|"]
    for row in rows:
        expected = ", ".join(f"{w['code']} {w['file']}:{w['line']}" for w in row["expected"]) or "none"
        exits = f"{row.get('plain_exit_code', '')} / {row.get('exit_code')}".lstrip(" /")
        lines.append(f"| {row['program']} | {row['variant']} | {expected} | {' '.join(row['verdicts']) or '-'} | "
                     f"{', '.join(row['others']) or '-'} | {exits} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
