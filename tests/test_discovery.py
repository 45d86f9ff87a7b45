"""Which files discovery finds: .gitignore files apply to their own directory and below only."""

from __future__ import annotations

from pathlib import Path

from loopcheck.discovery import discover


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _found(top: Path, root: Path, exclude: list[str] | None = None) -> list[str]:
    return sorted(f.absolute().relative_to(root).as_posix()
                  for f in discover([top], root, exclude or [], True).files)


def test_a_siblings_gitignore_does_not_apply(tmp_path: Path) -> None:
    _tree(tmp_path, {".git/HEAD": "", "a/.gitignore": "gen.py\nout/\n", "a/gen.py": "", "a/out/x.py": "",
                     "b/gen.py": "", "b/out/x.py": "", "b/keep.py": ""})
    assert _found(tmp_path, tmp_path) == ["b/gen.py", "b/keep.py", "b/out/x.py"]


def test_a_parents_gitignore_applies_below_it(tmp_path: Path) -> None:
    _tree(tmp_path, {".git/HEAD": "", ".gitignore": "gen.py\n/top_only.py\n", "gen.py": "", "top_only.py": "",
                     "pkg/gen.py": "", "pkg/top_only.py": "", "pkg/deep/gen.py": "", "pkg/deep/ok.py": ""})
    assert _found(tmp_path, tmp_path) == ["pkg/deep/ok.py", "pkg/top_only.py"]
    # walking a subdirectory still reads the .gitignore files above it, up to the repository root
    assert _found(tmp_path / "pkg", tmp_path) == ["pkg/deep/ok.py", "pkg/top_only.py"]


def test_gitignores_above_the_repository_root_do_not_apply(tmp_path: Path) -> None:
    _tree(tmp_path, {".gitignore": "*.py\n", "repo/.git/HEAD": "", "repo/x.py": ""})
    assert _found(tmp_path / "repo", tmp_path) == ["repo/x.py"]


def test_nested_gitignores_and_excludes_combine(tmp_path: Path) -> None:
    _tree(tmp_path, {".git/HEAD": "", ".gitignore": "*_gen.py\n", "src/.gitignore": "legacy/\n",
                     "src/a_gen.py": "", "src/legacy/old.py": "", "src/new.py": "", "src/sub/b_gen.py": "",
                     "src/sub/legacy/c.py": "", "tests/t.py": "", "venv/lib.py": "", "other/legacy/d.py": ""})
    assert _found(tmp_path, tmp_path) == ["other/legacy/d.py", "src/new.py", "tests/t.py"]
    assert _found(tmp_path, tmp_path, ["tests/"]) == ["other/legacy/d.py", "src/new.py"]


def test_a_file_given_by_name_is_checked_unless_excluded(tmp_path: Path) -> None:
    _tree(tmp_path, {".git/HEAD": "", ".gitignore": "gen.py\n", "gen.py": "", "skip_me.py": ""})
    assert _found(tmp_path / "gen.py", tmp_path) == ["gen.py"]
    assert _found(tmp_path / "skip_me.py", tmp_path, ["skip_me.py"]) == []


def test_each_file_is_found_once_however_it_is_reached(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "", "pkg/b.py": ""})
    (tmp_path / "z_link.py").symlink_to(tmp_path / "a.py")  # a link to a file found already
    (tmp_path / "pkg" / "dangling.py").symlink_to(tmp_path / "missing.py")  # no file behind it
    assert _found(tmp_path, tmp_path) == ["a.py", "pkg/b.py"]
    # a directory given inside another one given, a file given beside its directory
    found = discover([tmp_path / "pkg", tmp_path, tmp_path / "a.py"], tmp_path, [], True).files
    assert sorted(f.relative_to(tmp_path).as_posix() for f in found) == ["a.py", "pkg/b.py"]


def test_a_link_to_a_file_outside_is_found_under_its_own_name(tmp_path: Path) -> None:
    _tree(tmp_path, {"outside/real.py": "", "project/own.py": ""})
    (tmp_path / "project" / "linked.py").symlink_to(tmp_path / "outside" / "real.py")
    assert _found(tmp_path / "project", tmp_path) == ["project/linked.py", "project/own.py"]


def test_a_gitignore_matches_as_pathspec_does_though_its_patterns_are_compiled_when_needed() -> None:
    from loopcheck.discovery import _LazyPatterns, compile_patterns

    lines = ["# a comment", "", "*.py[cod]", "build/", "/top.py", "!build/keep.py", "data*/", "**/gen/**",
             "a/**/b.py", "\\#odd.py", "name with space.py  ", "!important.py", "*.py", "!src/*.py", "src/x?.py",
             "logs", "*.egg-info/", ".DS_Store"]
    paths = ["top.py", "pkg/top.py", "build/", "build/a.py", "build/keep.py", "x/build/", "data/", "data1/y.py",
             "dataset.py", "gen/x.py", "a/gen/b/c.py", "a/b.py", "a/x/y/b.py", "#odd.py", "name with space.py",
             "important.py", "src/a.py", "src/x1.py", "src/sub/a.py", "logs/", "logs/a.py", "my.egg-info/",
             "m.pyc", "other.txt"]
    lazy, spec = _LazyPatterns(lines), compile_patterns(lines)
    assert [lazy.match_file(p) for p in paths] == [spec.match_file(p) for p in paths]
    assert any(spec.match_file(p) for p in paths) and not all(spec.match_file(p) for p in paths)
    # what no path held the plain text of was never compiled
    assert not any(compiled is not None for runs, _, _, compiled in lazy.patterns if runs == (".DS_Store",))
