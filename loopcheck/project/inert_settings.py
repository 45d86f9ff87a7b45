"""Whether a configuration key is inert in everything the project ships.

An accumulation rule's finding holds only when the loop accumulates, i.e. when its window count N
is above 1 (``loopcheck.latent``). Where N is a configuration value
(``self.global_step % cfg.training.gradient_accumulate_every == 0``, ``if config.train.accumulation_steps
> 1:``) and every configuration the project ships sets it to 1 or 0, nothing accumulates at the values
the project is run with: the finding describes a loop nobody runs. The same holds for a switch that
guards the code a finding is about (``if cfg['training']['clip_grad_norm']:``, ``if cfg.clip_grad > 0:``,
``loopcheck.latent.switched_off``), inert only at 0, false or null, where a configuration says so: a
configuration file, a document, or a Python configuration module's attribute (``cfg.clip_grad = 0``),
not only a parameter's default. The key is then inert when:

- its last name (``gradient_accumulate_every``; case and ``-``/``_`` aside, as command-line options
  write it) is found at least once with a value, in the project's YAML, JSON, TOML and INI files,
  its shell scripts, Markdown documents and notebooks (a README command line; not in a comment line of
  a configuration file or script, `# accum: 8`), or in its Python files
  (a yacs default ``_C.TRAIN.ACCUMULATION_STEPS = 0``, a dataclass field ``accum: int = 1``, a keyword
  ``accum=1``, a dict entry ``"accum": 1``, a launcher's ``"training.accum=4"``);
- every value found is inert: 0, 1, null / None / ``~``, false;
- nothing else names it: no command-line option (``add_argument("--accumulation-steps")``, a
  ``dest="..."``, an absl ``flags.DEFINE_integer("accumulation_steps", ...)``), no value that is not
  a literal (``config.TRAIN.ACCUMULATION_STEPS = args.accumulation_steps``, an argparse option copied
  into it; ``self.accum = accum``, a constructor argument; a local or keyword named as the key it
  reads, ``accum = config["accum"]``, ``Accelerator(accum=config.accum)``, sets nothing), no mention in a document without a value
  (prose that documents the key, ``--accum $N``);
- for the key of a configuration tree (``config.optimizer.iter_size``, ``cfg["train"]["accum"]``), a
  command-line option of that name (``--iter_size``, an attribute of a flat namespace: another program of
  the project, PointContrast's detection folder beside its Hydra segmentation one) and a local given a
  computed value under it (``iter_size = coords[:, -1].max() + 1``) set nothing; a literal still counts;
- the key is no option the project's text does not spell: where the project uses a parser that
  makes options of dataclass fields or function parameters (tyro, fire, typer...), a key set in
  Python is unclear; where it makes options of a library's dataclass (``HfArgumentParser`` with
  transformers' ``TrainingArguments``, ``LightningCLI``), that dataclass's own fields
  (``gradient_accumulation_steps``) are never inert and a key set in Python is unclear; where it
  makes options of a config's keys (``add_argument(f"--{key}")``), no key is inert.

A script run by Hydra (``@hydra.main(config_path="../conf/multiscale")``) reads its configurations
from that folder: the configuration files elsewhere (another script's ``conf/t5/t5_training.json``)
set another script's keys and are not read for it, unless something points Hydra elsewhere
(``--config-dir``, ``-cp``, a ``hydra.searchpath``).

A script that is one of a series of experiment folders, each with its copy of the script and its
configuration (``exp/exp001/train.py`` and ``exp/exp001/config.yaml``, ``exp/exp002/...``), reads the
configuration of its own folder: the other folders' configuration files set their own scripts' keys.

A top folder of the project that ships its own README, requirements or packaging is a project of its
own (``VL_adapter/VL-T5`` beside ``VL_adapter/CLIP-ViL``): for a file inside it, only its own files and
those outside every such folder (the root's README, a shared ``scripts/``) are read.

Anything unclear keeps the finding, and so does a project whose root no marker names (``.git``,
``pyproject.toml``, ``setup.py``: ``loopcheck.project.index``): a root guessed from the packages may
leave beside it the module that defines the options or the configs. Read only when a finding with
such a setting is about to be reported, once per key and project in a run; the files read are those
of the project's walk (``ProjectIndex.python_files`` and ``documents``), and their sizes and
modification times (``stamp``) join the cache digest of a file whose result asked.

>>> _values(b"  gradient_accumulate_every: 1\\n", "gradient_accumulate_every", False)
[1]
>>> _values(b"python train.py --accumulation-steps 4", "accumulation_steps", False)
[2]
>>> _values(b"parser.add_argument('--accumulation-steps', type=int)", "accumulation_steps", True)
[None]
>>> _values(b"_c.train.accumulation_steps = 0", "accumulation_steps", True)
[0]
>>> _values(b"if config.train.accumulation_steps > 1:", "accumulation_steps", True)
[]
>>> _values(b'accumulation_steps = config["accumulation_steps"]', "accumulation_steps", True)
[]
>>> _values(b'config["train"]["accum"] = args.accum', "accum", True, nested=True)
[None]
>>> _values(b"accelerator(accumulation_steps=config.accumulation_steps)", "accumulation_steps", True)
[]
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.patterns import Pattern

if TYPE_CHECKING:
    from loopcheck.project.index import ProjectIndex

_MAX_BYTES = 16_000_000  # one file: a larger one is data, not a configuration (a notebook with outputs is read)
# configuration files and scripts whose lines starting with `#` are comments
_COMMENTED = (".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".sh", ".bash")
_COMMENT_LINE = Pattern(rb"^[ \t]*#.*$", re.MULTILINE)
_CONFIGURATIONS = (".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf")
# `@hydra.main(version_base=None, config_path="../conf/multiscale", ...)`: the script's configuration folder
_HYDRA_MAIN = Pattern(r"@hydra\.main\([^)]*?\bconfig_path\s*=\s*[\"']([^\"'{}]+)[\"']")
# what may point Hydra at configurations outside that folder
_ELSEWHERE = (b"--config-dir", b"--config-path", b"-cd ", b"-cp ", b"searchpath")
_MAX_DOCUMENTS = 5_000  # the documents of a project: past that, a data set checked in, not read
UNCLEAR = None  # a value that says nothing sure: the key is set some other way
# a literal value (the text is lower-cased), then where it ends: a value that goes on is an expression
_LITERAL = r"(-?\d+(?:\.\d+)?|null|none|~|false|true)(?=[\"'`]?\s*(?:[,;)}\]#\r\n]|$|\s))"
# in a document, after the key: `key: 1`, `key=1`, `--key 4`, `"key": 1`, `key = 1`
_DOCUMENT_VALUE = Pattern(r"[\"'`]?[ \t]*(?:[:=][ \t]*|[ \t]+)[\"']?" + _LITERAL)
# in Python, after the key: an assignment, a keyword or parameter default, an annotated field
_ASSIGNED = Pattern(r"[ \t]*(?::[ \t]*[\w\[\]., |]{1,80}?[ \t]*)?=(?!=)[ \t]*[\"']?")
_DICT_ENTRY = Pattern(r"[\"'][ \t]*:[ \t]*")
_ITEM_SET = Pattern(r"[\"'][ \t]*\][ \t]*=(?!=)[ \t]*")  # `cfg["train"]["accum"] = ...`
_VALUE = Pattern(_LITERAL)
# before the key in Python: a command-line option's name or destination, an absl flag's name
_OPTION = Pattern(r"(?:[\"']-{1,2}|dest[ \t]*=[ \t]*[\"']|define_\w+\([ \t]*[\"'])$")
# Parsers that make options of dataclass fields or of a function's parameters: a key the project
# sets in Python (``accum: int = 1``, ``def main(accum=1)``) may be an option's default
_FIELD_OPTIONS = (b"tyro", b"simple_parsing", b"pyrallis", b"draccus", b"import fire", b"from fire", b"typer",
                  b"argparse_dataclass", b"datargs", b"clize")
# Options the project's text never spells: those of a library's dataclass (transformers'
# ``TrainingArguments`` through ``HfArgumentParser``, Lightning's ``Trainer`` through ``LightningCLI``),
# options made of a config's keys (``add_argument(f"--{key}", default=value)``)
_UNSPELLED_OPTIONS = (b"jsonargparse", b"(f'--{", b'(f"--{', b"('--' +",
                      b'("--" +', b"'--%s'", b'"--%s"', b"'--{}'", b'"--{}"')


# Parsers of a library's dataclass: the options it makes are that dataclass's fields (transformers'
# ``TrainingArguments``, Lightning's ``Trainer``), which the project's text need not spell, and the fields
# of the project's own dataclasses handed beside it (``HfArgumentParser((Config, TrainingArguments))``)
_LIBRARY_PARSERS = {b"hfargumentparser": ("gradient_accumulation_steps", "max_grad_norm", "fp16", "bf16",
                                          "lr_scheduler_type", "warmup_steps", "warmup_ratio"),
                    b"lightningcli": ("accumulate_grad_batches", "gradient_clip_val", "precision")}


def inert(index: ProjectIndex, name: str, path: Path | None = None, off: bool = False, nested: bool = False) -> bool:
    """Whether the configuration key ``name`` (the setting's last name) is inert in everything the
    project ships (see the module's documentation), for the file ``path`` (its sub-project's files);
    ``off``: a switch, inert only at 0, false or null (1 turns it on); ``nested``: the key of a
    configuration tree (``config.optimizer.iter_size``), which a command-line option (``--iter_size``,
    an attribute of a flat namespace) does not set. False where anything is unclear."""
    key = name.lower().replace("-", "_")
    scope, configurations = _scopes(index, path) if path is not None else (None, None)
    cached = f"{key}@{scope}@{configurations}" + ("!off" if off else "") + ("!nested" if nested else "")
    found = index.settings.get(cached)
    if found is None:
        found = index.settings[cached] = _inert(index, key, scope, 0 if off else 1, configurations, nested)
    return found


def _scopes(index: ProjectIndex, path: Path) -> tuple[str | None, str | None]:
    """The sub-project and the Hydra configuration folder of the file ``path``, worked out once per file
    in a run (every finding with a setting asks)."""
    found = index.setting_scopes.get(path)
    if found is None:
        found = index.setting_scopes[path] = (_sub_project(index, path),
                                              _hydra_folder(path) or _experiment_folder(index, path))
    return found


def _experiment_folder(index: ProjectIndex, path: Path) -> str | None:
    """The script's own folder, where it is one of a series of experiment folders, each with its copy
    of the script and its configuration (``exp/exp714/train.py`` beside ``exp/exp714/config.yaml``, and
    ``exp/exp001/``, ``exp/exp002/``, ... alike: run as ``python exp/$exp/train.py -y
    exp/$exp/config.yaml``): the folder's configurations are the script's, its siblings' are theirs."""
    folder = path.parent
    if folder == index.root or folder.parent == folder or folder not in _series(index, folder.parent, path.name):
        return None
    return os.path.abspath(folder) + os.sep if len(_series(index, folder.parent, path.name)) >= 3 else None


def _series(index: ProjectIndex, parent: Path, script: str) -> frozenset[Path]:
    """The folders of ``parent`` that hold a script named ``script`` and a configuration file, read once
    per run (each script of the series asks)."""
    found = index.experiment_series.get((parent, script))
    if found is None:
        try:
            found = frozenset(parent / name for name in os.listdir(parent)
                              if os.path.isfile(parent / name / script)
                              and any(n.endswith(_CONFIGURATIONS) for n in os.listdir(parent / name)))
        except OSError:
            found = frozenset()
        index.experiment_series[(parent, script)] = found
    return found


def _hydra_folder(path: Path) -> str | None:
    """The folder ``@hydra.main(config_path=...)`` of the script ``path`` names, where it exists."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace") if path.stat().st_size <= _MAX_BYTES else ""
    except OSError:
        return None
    found = _HYDRA_MAIN.search(text) if "hydra" in text else None
    if found is None:
        return None
    folder = os.path.abspath(path.parent / found.group(1))  # (as the configurations' paths are compared)
    return folder + os.sep if os.path.isdir(folder) else None


def _sub_project(index: ProjectIndex, path: Path) -> str | None:
    """The top folder of the project that holds ``path``, where that folder is a project of its own
    (it ships its own README, requirements or packaging: ``VL_adapter/VL-T5`` beside ``CLIP-ViL``)."""
    try:
        parts = index.relative(path).split("/")
    except (OSError, ValueError):
        return None
    return parts[0] if len(parts) > 1 and _is_sub_project(index.root / parts[0]) else None


def _is_sub_project(folder: Path) -> bool:
    try:
        names = [name.lower() for name in os.listdir(folder)]
    except OSError:
        return False
    return any(name.startswith("readme") or name.startswith("requirements") and name.endswith(".txt")
               or name in ("setup.py", "setup.cfg", "pyproject.toml") for name in names)


def _in_scope(index: ProjectIndex, path: str, scope: str | None, sub_projects: dict[str, bool]) -> bool:
    """Whether a file of the project speaks for the sub-project ``scope``: one inside it, or outside
    every sub-project (the root's README, a shared ``scripts/`` folder)."""
    if scope is None:
        return True
    try:
        parts = index.relative(Path(path)).split("/")
    except (OSError, ValueError):
        return True
    if len(parts) == 1 or parts[0] == scope:
        return True
    if parts[0] not in sub_projects:
        sub_projects[parts[0]] = _is_sub_project(index.root / parts[0])
    return not sub_projects[parts[0]]


def stamp(index: ProjectIndex) -> str:
    """A digest of the sizes and modification times of every file ``inert`` may read (taken before
    the files are read: a change during the run shows on the next)."""
    from loopcheck.project.index import files_stamp

    if index.settings_stamp is None:
        documents = index.documents()
        lines = [] if documents is None else [str(p) for p in index.python_files()] + documents
        index.settings_stamp = files_stamp(lines)
    return index.settings_stamp


def _inert(index: ProjectIndex, key: str, scope: str | None = None, most: int = 1,
           configurations: str | None = None, nested: bool = False) -> bool:
    from loopcheck.project.index import marked_folder

    stamp(index)
    if marked_folder(index.root) != index.root:
        return False  # a root guessed from the packages: an option or config may lie beside it, unread
    documents = index.documents()
    if documents is None or len(documents) > _MAX_DOCUMENTS or len(key) < 3:
        return False
    values: list[int | None] = []
    in_python = field_options = in_documents = False
    sub_projects: dict[str, bool] = {}
    for paths, python in ((documents, False), ([str(p) for p in index.python_files()], True)):
        for path in paths:
            if not _in_scope(index, path, scope, sub_projects):
                continue
            if configurations is not None and not python and path.endswith(_CONFIGURATIONS) \
                    and not os.path.abspath(path).startswith(configurations):
                continue  # another script's configuration
            text = _shipped_text(path)
            if configurations is not None and any(word in text for word in _ELSEWHERE):
                return False  # Hydra may be pointed at configurations outside the script's folder
            found = _values(text, key, python, nested)
            if any(v is UNCLEAR or v > most for v in found):  # type: ignore[operator]
                return False
            values += found
            if python and any(word in text for word in _UNSPELLED_OPTIONS):
                return False
            library = [fields for word, fields in _LIBRARY_PARSERS.items() if python and word in text]
            if any(key in fields for fields in library):
                return False  # one of the library dataclass's own options
            in_python = in_python or (python and bool(found))
            in_documents = in_documents or bool(found) and (not python or _set_on_an_object(text, key))
            field_options = field_options or (python and any(word in text for word in _FIELD_OPTIONS)) or bool(library)
    # a switch is off as shipped only where a configuration says so: in Python, `fp16: bool = False`
    # may be a helper's parameter that callers turn on (`cfg.clip_grad = 0`, set on an object, is a setting)
    return bool(values) and not (in_python and field_options) and (most > 0 or in_documents)


def inert_in_folder(index: ProjectIndex, path: Path, module: str, name: str) -> bool:
    """Whether ``module.name``, read by the script ``path`` from a module of its own folder (``import
    config``, then ``config.ACCUMULATION_STEPS``: a Kaggle solution's folder per model, each with its
    ``config.py``), is inert for that script: the folder's Python files set it (that module among them)
    only to 0 or 1, and no option or document of the project gives it another value. Other folders'
    modules of that name are other scripts' settings."""
    key = name.lower().replace("-", "_")
    folder = path.parent
    if len(key) < 3 or not (folder / f"{module}.py").is_file():
        return False
    stamp(index)
    documents = index.documents()
    if documents is None or len(documents) > _MAX_DOCUMENTS:
        return False
    values: list[int | None] = []
    for document in documents:
        values += _values(_shipped_text(document), key, False)
    own = [str(p) for p in index.python_files() if p.parent == folder]
    for script in own:
        text = _text(script)
        if any(word in text for word in _UNSPELLED_OPTIONS + _FIELD_OPTIONS + tuple(_LIBRARY_PARSERS)):
            return False
        values += _values(text, key, True)
    return bool(values) and all(v is not UNCLEAR and v <= 1 for v in values)  # type: ignore[operator]


def _shipped_text(path: str) -> bytes:
    """``_text`` less a configuration file's or script's comment lines (``# accum: 8``: a value left
    out of what ships)."""
    text = _text(path)
    return _COMMENT_LINE.sub(b"", text) if path.endswith(_COMMENTED) and b"#" in text else text


def _text(path: str) -> bytes:
    """The file's text, lower-cased (b"" where it cannot be read, or is too large for a configuration)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
            return b""  # (a FIFO would block the read)
        with open(path, "rb") as handle:
            return handle.read().lower()
    except OSError:
        return b""


def _values(text: bytes, key: str, python: bool, nested: bool = False) -> list[int | None]:
    """The value given to ``key`` at each place the lower-cased ``text`` sets it: 0 or 1 for an
    inert one, 2 for another literal, ``UNCLEAR`` for anything else (an option, an expression, a
    mention without a value); nothing for a place that reads it (Python only), nor, for the ``nested``
    key of a configuration tree, for a command-line option of that name or a local given a computed
    value under it."""
    if key.encode() not in text and key.replace("_", "-").encode() not in text:
        return []  # (a spelling that mixes `-` and `_` is not looked for)
    spelled = re.escape(key).replace("_", "[-_]")
    found: list[int | None] = []
    decoded = text.decode("utf-8", errors="replace")
    for match in re.finditer(rf"(?<![\w]){spelled}(?![\w])", decoded):
        before, after = decoded[max(0, match.start() - 24):match.start()], decoded[match.end():match.end() + 200]
        if not python:
            value = _DOCUMENT_VALUE.match(after)
            found.append(_number(value.group(1)) if value is not None else UNCLEAR)
            continue
        if _OPTION.search(before):
            if not nested:
                found.append(UNCLEAR)  # a command-line option sets it (with help text or without: a user can)
            continue
        quoted = before.endswith(("'", '"'))
        item = _ITEM_SET.match(after) if quoted else None
        assigned = _ASSIGNED.match(after) or (_DICT_ENTRY.match(after) or item if quoted else None)
        if assigned is None:
            continue  # a read: `cfg.accum`, `cfg["accum"]`, `accum > 1`
        value_text = after[assigned.end():]
        if item is None and (re.match(rf"[\w.]+(?:\[[\"'][\w-]+[\"']\])*\[[\"']{spelled}[\"']\]", value_text) or (
                not before.endswith(".") and re.match(rf"[\w.]+\.{spelled}[ \t]*(?:[,)#\r\n]|$)", value_text))):
            # a local or keyword named as the key it reads: `accum = config["accum"]`, `f(accum=cfg.accum)`
            # (an attribute or item set from one, `cfg.accum = args.accum`, `cfg["accum"] = args.accum`,
            # copies an option in)
            continue
        value = _VALUE.match(after, assigned.end())
        if value is None and nested and re.search(r"(?:^|\n)[ \t]*$", before):
            continue  # a local of that name given a computed value (`iter_size = coords[:, -1].max() + 1`)
        found.append(_number(value.group(1)) if value is not None else UNCLEAR)
    return found


def _set_on_an_object(text: bytes, key: str) -> bool:
    """The lower-cased Python ``text`` sets ``key`` as an attribute to a literal (a config module's
    ``cfg.clip_grad = 0``): a setting, not a parameter's default that a caller may override."""
    spelled = re.escape(key).encode()
    return re.search(rb"^[ \t]*[\w.]+\." + spelled + rb"[ \t]*=[ \t]*" + _LITERAL.encode(), text, re.MULTILINE) is not None


def _number(literal: str) -> int:
    """0 or 1 for an inert value, 2 for any other."""
    if literal in ("null", "none", "~", "false"):
        return 0
    if literal == "true":
        return 2  # a count written as a flag: not clear
    number = float(literal)
    return int(number) if number in (0, 1) else 2
