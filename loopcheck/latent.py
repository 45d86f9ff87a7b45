"""The setting a finding depends on, said in its message.

An accumulation rule's finding (a partial window carried, a clip or scheduler step per micro-batch,
DDP all-reducing every micro-batch, ...) describes a loop that steps every N micro-batches. Where
N is a configuration value (``if (step + 1) % args.gradient_accumulation_steps == 0:``), nothing
goes wrong at N = 1, which is often the default: a user reading the finding on a script run with
the default takes it for a false alarm. The message then names the setting as the code writes it
and, where the file shows it, its default: ``(only when `args.gradient_accumulation_steps` > 1;
its default is 1)``. Nothing is added where N is a literal, where the default accumulates already,
or where one of the loop's variants that holds the flagged statement steps another way.

Where N is a configuration key (``cfg.training.gradient_accumulate_every``, ``config.TRAIN.ACCUMULATION_STEPS``,
``cfg['accum']``, also the count of a micro-step loop, ``for up_idx in range(args.update_frequency):``;
not a plain name, which a caller may pass by position) that everything the project
ships leaves inert, the finding is not reported at all (``inert``): every shipped config, launch script
and README command that gives the key a value gives 0 or 1 (or null, false), and no command-line
option sets it (``loopcheck.project.inert_settings``). A key set above 1 anywhere, one an option sets,
or one found nowhere keeps the finding and its note.

Where N is a value the file writes once and for all at 0 or 1, the key of a dict literal
(``config = {"accum_grads": 1, ...}``, read as ``self.config["accum_grads"]``) or the attribute of a
class of the module (Kaggle's ``class CFG: gradient_accumulation_steps = 1``), and nothing else in the
file sets it, the loop never accumulates and the finding is not reported at all (``literal_one``).

Where N is a configuration attribute (``cfg.grad_accum_iters``) that only a builder keyword's inert
default of the project gives (``get_baseconfig_by_epoch(..., grad_accum_iters=1)`` in another module,
no caller passing it, nothing else setting it: ``loopcheck.project.unset_keywords``), or a parameter of
the loop's function with an inert default that no call of the project passes (``def fit(...,
acc_steps=1)``, called without it; also where only the script's own calls of its function leave it out,
though another script of the project gives a parameter of that name another default), no run the
project can make accumulates, and the finding is not reported at all (``unset``).
"""

from __future__ import annotations

import re

import libcst as cst

from loopcheck.model import Cond, Event, FileModel
from loopcheck.model.accelerate import accumulation_setting
from loopcheck.model.guards import at_most_one, slipped
from loopcheck.model.syntax import dotted, int_value, is_none, is_zero, last_part, source, walk
from loopcheck.model.training import Style, TrainingLoop, micro_count
from loopcheck.model.values import option_defaults

# Parsers that make command-line options of a function's parameters
_PARAMETER_OPTIONS = ("fire", "typer", "click", "tyro", "jsonargparse", "clize", "defopt", "plac")
# Rules whose findings need the loop to accumulate (N > 1): at N = 1 every micro-batch is a step.
ACCUMULATION_RULES = frozenset({"LC101", "LC102", "LC105", "LC106", "LC107", "LC204", "LC301", "LC401", "LC501"})


def condition(model: FileModel, held: str) -> str | None:
    """`` (only when `X` > 1; its default is 1)`` for a finding that holds under the setting ``held``
    (``setting``), or None where the file gives it a default that accumulates already."""
    default = _default(model, _setting_name(held))
    if default is None:
        return f" (only when `{held}` > 1)"
    return f" (only when `{held}` > 1; its default is {default})" if default in (0, 1) else None


def setting(model: FileModel, code: str, node: cst.CSTNode, sites: bool = False, plain: bool = True) -> str | None:
    """The configuration value a finding of ``code`` at ``node`` holds under (``args.accum``: the
    loop accumulates only when it is above 1), or None; ``sites``: a node where an event's helper is
    called counts as the event's; ``plain=False``: a plain name is given as it is, whether or not the
    file gives it a default (not read: the caller wants attributes only)."""
    if code not in ACCUMULATION_RULES:
        return None
    holding = [t for t in model.training_loops if node in _event_nodes(t, sites)]
    if code == "LC106" and any(t.step_guard is not None and t.step_guard.test is not None
                               and slipped(t.step_guard.test) is not None for t in holding):
        return None  # `i + 1 % N == 0` is wrong at every N, 1 included
    settings = {_setting(model, t, plain) for t in holding}
    if len(settings) == 2 and None in settings:
        # `if not N or (i + 1) % N == 0:` also has a variant where N is off (0, None) and every
        # micro-batch steps: that variant is the setting's other side, not another way to step
        found = next(s for s in settings if s is not None)
        if all(_setting(model, t, plain) is not None or _turns_off(t, found) for t in holding):
            settings = {found}
    return settings.pop() if len(settings) == 1 else None


def inert(model: FileModel, held: str) -> bool:
    """Whether the configuration key of the setting ``held`` (``cfg.training.accum``, ``cfg['accum']``;
    not a plain name, which callers may pass by position) is inert (0, 1, null) in every configuration,
    launch script and document the project ships, and no command-line option sets it
    (``loopcheck.project.inert_settings``), or that the file asserts to be 1: as shipped, the loop never
    accumulates."""
    if not ("." in held or held.endswith("]")):
        return False
    if asserted_one(model, held):
        return True
    if model.project is None:
        return False
    if model.project.inert_setting(_setting_name(held), nested=_nested(held)):
        return True
    module, _, name = held.partition(".")
    return name.isidentifier() and module in _plain_imports(model) and model.project.inert_in_folder(module, name)


def asserted_one(model: FileModel, held: str) -> bool:
    """The file asserts the setting ``held`` to be 1 (DMD2's ``assert args.gradient_accumulation_steps ==
    1, "grad accumulation not supported yet"``) at the top level of a function or of the module: every
    run that gets past it has 1 (not an assert under a condition, ``if args.fp16: assert N == 1``)."""
    if "assert" not in model.source or held not in model.source:
        return False
    asserted = model.read_once.get("asserted_one")
    if asserted is None:  # (one walk of the file, however many findings ask)
        bodies = [model.module.body, *(node.body.body for node in walk(model.module, into_functions=True)
                                       if type(node) is cst.FunctionDef and type(node.body) is cst.IndentedBlock)]
        asserted = model.read_once["asserted_one"] = {
            dotted(test.left) for body in bodies for stmt in body if type(stmt) is cst.SimpleStatementLine
            for small in stmt.body if type(small) is cst.Assert and type(test := small.test) is cst.Comparison
            and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.Equal
            and int_value(test.comparisons[0].comparator) == 1}
    return held in asserted  # type: ignore[operator]


def literal_one(model: FileModel, code: str, node: cst.CSTNode) -> bool:
    """A finding of ``code`` at ``node`` needs N > 1, and N is a value the file writes as a literal at 0
    or 1 and sets nowhere else (``_literal_entry``): the loop never accumulates, whatever its step
    condition counts."""
    if code not in ACCUMULATION_RULES:
        return False
    holding = [t for t in model.training_loops if node in _event_nodes(t, sites=True)]
    return bool(holding) and all(t.style is Style.GUARDED and t.modulus is not None
                                 and _literal_entry(model, t.modulus) in (0, 1) for t in holding)


def _literal_entry(model: FileModel, count: cst.BaseExpression) -> int | None:
    """The integer the file writes, once and for all, as the count ``count``: the key of a dict it binds
    the base to (``cfg["accum"]`` and ``cfg = {"accum": 1}``), the attribute of a class of the module
    (``CFG.gradient_accumulation_steps`` and ``class CFG: gradient_accumulation_steps = 1``, Kaggle's
    notebook configuration); None where anything else may set it: the base bound to anything else too
    (a loaded config), an item of the dict or the class's attribute set (``cfg["accum"] = args.accum``,
    ``cfg[k] = v``, ``setattr(CFG, k, v)``), the dict updated with anything but the file's options,
    none of them the key."""
    if type(count) is cst.Attribute and type(count.value) is cst.Name:
        return _class_attribute(model, count.value.value, count.attr.value)
    key = _key(count)
    if key is None or type(count) is not cst.Subscript or (base := dotted(count.value)) is None:
        return None
    name = last_part(base)
    found: set[int | None] = set()
    for value in model.index.values.get(name, []):
        if type(value) is cst.Dict:
            found.update(int_value(e.value) if type(e) is cst.DictElement else None for e in value.elements
                         if type(e) is not cst.DictElement or type(e.key) is not cst.SimpleString
                         or e.key.evaluated_value == key)
        elif type(value) is not cst.Name or value.value != name:  # (`self.config = config`: the same dict)
            return None
    if len(found) != 1 or None in found:
        return None
    options = {option for option, _ in option_defaults(model.index)}
    written = rf"\b{re.escape(name)}\s*(?:\[([^\]\n]*)\]\s*[-+*/]?=(?!=)|\.(update|setdefault)\((.*)\))"
    for set_item in re.finditer(written, model.source):
        at, changed, given = set_item.groups()
        if at is not None and not (at.strip()[:1] in ("'", '"') and at.strip()[1:-1] != key):
            return None  # `cfg["accum"] = args.accum`, `cfg[k] = v`
        # `config.update(vars(args))` copies in the file's options: none of them is the key
        if changed is not None and not (re.fullmatch(r"vars\(\w+\)", given.strip()) and key not in options):
            return None
    return found.pop()


def _class_attribute(model: FileModel, name: str, attribute: str) -> int | None:
    """The integer the module's class ``name`` gives its attribute in its body, where nothing else in
    the file sets it (``CFG.accum = 4``, ``setattr(CFG, ...)``)."""
    classes = [s for s in model.module.body if type(s) is cst.ClassDef and s.name.value == name]
    if len(classes) != 1 or type(classes[0].body) is not cst.IndentedBlock:
        return None
    found = _field_values([small for stmt in classes[0].body.body if type(stmt) is cst.SimpleStatementLine
                           for small in stmt.body], attribute)
    if len(found) != 1 or None in found:
        return None
    elsewhere = rf"\b{re.escape(name)}\.{re.escape(attribute)}\s*[-+*/]?=(?!=)|\bsetattr\(\s*{re.escape(name)}\b"
    return found.pop() if re.search(elsewhere, model.source) is None else None


def _plain_imports(model: FileModel) -> set[str]:
    """The modules the file imports by a bare ``import name`` (``import config``)."""
    return {alias.name.value for node in model.index.imports if type(node) is cst.Import for alias in node.names
            if type(alias.name) is cst.Name and alias.asname is None}


def switched_off(model: FileModel, node: cst.CSTNode) -> bool:
    """Every event at ``node`` runs only where a configuration switch is on (``if
    cfg['training']['clip_grad_norm']:``, ``if config.TRAIN.USE_EMA:``) that everything the project
    ships leaves off (0, false, null) and no command-line option sets: the finding is about code no
    shipped configuration runs."""
    if model.project is None:
        return False
    at = model.read_once.get("events_at")
    if at is None:  # (one walk of the file's events, however many findings ask)
        at = model.read_once["events_at"] = {}
        for event in model.events():
            at.setdefault(id(event.node), []).append(event)  # type: ignore[union-attr]
    events = at.get(id(node), [])  # type: ignore[union-attr]
    return bool(events) and all(any(
        not cond.negated and (key := _switch_key(cond.test)) is not None and not _in_the_other_branch(at, event, cond)
        and model.project.inert_setting(key, off=True) for cond in event.conds) for event in events)


def _in_the_other_branch(at: dict[int, list[Event]], event: Event, cond: Cond) -> bool:
    """The switch's ``else`` holds an event of the same kind (``if cfg.fp16: scaled.backward() else:
    loss.backward()``): a finding about the loop is anchored on one branch but holds in both."""
    return any(other.kind is event.kind and any(c.owner is cond.owner and c.negated for c in other.conds)
               for events in at.values() for other in events)


def _switch_key(test: cst.BaseExpression | None) -> str | None:
    """The key a test reads as a switch: ``cfg['training']['clip_grad_norm']`` or ``cfg.train.use_amp``
    (not a plain name: a parameter or a local may be set by any caller), also a threshold at 0 (``if
    cfg.clip_grad > 0:``, off at 0, false or null alike)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.GreaterThan) and is_zero(test.comparisons[0].comparator):
        test = test.left
    if isinstance(test, cst.Subscript):
        return _key(test)
    name = dotted(test) if test is not None else None
    return last_part(name) if name is not None and "." in name else None


def inert_count(model: FileModel, training: TrainingLoop) -> bool:
    """The loop's accumulation count is a configuration key that everything the project ships
    leaves inert (``inert``), or a literal of the file at 0 or 1 (``literal_one``): as shipped, a
    batch is an optimizer step."""
    if training.style is Style.GUARDED and training.modulus is not None \
            and _literal_entry(model, training.modulus) in (0, 1):
        return True
    held = _setting(model, training)
    return held is not None and inert(model, held)


def unset(model: FileModel, code: str, node: cst.CSTNode) -> bool:
    """A finding of ``code`` at ``node`` needs N > 1, and N is a setting (``cfg.grad_accum_iters``)
    that only a builder keyword's inert default of the project gives, no caller setting it
    (``loopcheck.project.unset_keywords``): nothing accumulates in any run the project can make.
    Also where the finding is at the loop's call of a helper that back-propagates or steps."""
    if code not in ACCUMULATION_RULES or model.project is None or not model.project.counts_to_an_attribute:
        return False
    held = setting(model, code, node, sites=True, plain=False)
    if held is None or held.endswith("]"):
        return False
    if "." not in held and _left_out(model, node, held):
        return True
    # a plain name: a parameter whose default is inert and that no caller passes (`fit(...,
    # acc_steps=1)` called without it), as the project's files read it
    defaults = _defaults(model, held) if "." not in held else None
    return (defaults is None or bool(defaults) and defaults <= {0, 1}) and model.project.unset_setting(last_part(held))


def _left_out(model: FileModel, node: cst.CSTNode, name: str) -> bool:
    """``name`` is a parameter with an inert default of the one top-level function of the file that
    takes it, which holds ``node``, and every call of that function in the file leaves it out, nothing
    else there naming the function: the script runs it only so (``def train_diffusion(...,
    gradient_accumulation_steps=1)``, called as ``train_diffusion(resume_from=args.resume_from)`` under
    ``if __name__ == "__main__":``), where no other file of the project imports the script and no parser
    makes options of parameters (fire, typer, ...)."""
    functions = [stmt for stmt in model.module.body if type(stmt) is cst.FunctionDef
                 and any(p.name.value == name for p in [*stmt.params.params, *stmt.params.kwonly_params])]
    if len(functions) != 1 or any(parser in model.source for parser in _PARAMETER_OPTIONS):
        return False
    function = functions[0]
    params = [*function.params.params, *function.params.kwonly_params]
    position, param = next((i, p) for i, p in enumerate(params) if p.name.value == name)
    if param.default is None or not (int_value(param.default) in (0, 1) or is_none(param.default)):
        return False
    calls = [c for c in model.index.calls if type(c.func) is cst.Name and c.func.value == function.name.value]
    if not calls or len(re.findall(rf"\b{re.escape(function.name.value)}\b", model.source)) != len(calls) + 1:
        return False  # (named otherwise too: handed to a launcher, a table, a parser)
    if any(a.star or a.keyword is not None and a.keyword.value == name for c in calls for a in c.args) \
            or any(len([a for a in c.args if a.keyword is None]) > position for c in calls):
        return False
    if not any(node is n for n in walk(function, into_functions=True)):
        return False
    return model.project is not None and not model.project.imported_elsewhere()


def setting_note(model: FileModel, modulus: cst.BaseExpression | None) -> str:
    """`` (only when `args.N` > 1; its default is 1)`` for a condition counting to the configuration
    value ``modulus`` (an attribute: an option or a config field), or an empty string."""
    setting = dotted(modulus) if modulus is not None else None
    return (condition(model, setting) or "") if setting is not None and "." in setting else ""


def _turns_off(training: TrainingLoop, setting: str) -> bool:
    """The variant assumes the setting off: ``N`` false, ``N == 0``, or no value above 1 (``N <= 1``)."""
    assumptions = training.loop.assumptions
    return assumptions.get(setting) is False or assumptions.get(f"{setting}==0") is True \
        or at_most_one(assumptions, setting)


def _event_nodes(training: TrainingLoop, sites: bool = False) -> set[cst.CSTNode]:
    loop = training.loop
    events = [*loop.events(deep=True), *training.steps, *training.backwards,
              *(loop.parent.events() if loop.parent is not None else [])]
    nodes: set[cst.CSTNode] = {e.node for e in events}
    nodes.update(c.call for e in events for c in e.contexts if c.kind == "accumulate")  # a finding on the `with`
    if sites:
        nodes.update(e.site[0] for e in events if e.site is not None)
    nodes.add(loop.node)
    if training.step_guard is not None and training.step_guard.test is not None:
        nodes.add(training.step_guard.test)  # a finding on the step condition itself
    return nodes


def _setting(model: FileModel, training: TrainingLoop, plain: bool = True) -> str | None:
    """The configuration value the variant's step condition counts to (``args.accum_iter``, or the
    attribute or key every assignment of a local name binds: ``accum_iter = args.accum_iter``,
    ``accum = config["grad_accumulation"]``), None where the
    variant does not step under such a condition."""
    if training.style is Style.ACCELERATE:
        return _accelerate_setting(model)
    if training.style is Style.MICRO_LOOP:
        # `for up_idx in range(args.update_frequency):`, a configuration value
        count = micro_count(training.loop)
        name = dotted(count) if count is not None else None
        return name if name is not None and "." in name else None
    if training.style is not Style.GUARDED or training.modulus is None:
        return None
    name = dotted(training.modulus)
    if name is None:
        return _keyed(model, training.modulus)
    if "." in name:
        return name
    # (`grad_accumulation_steps = config["grad_accumulation"]`: the key read from the config)
    bound = {dotted(v) if isinstance(v, cst.Attribute) else _keyed(model, v) if isinstance(v, cst.Subscript)
             else None for v in model.index.values.get(name, [])}
    if len(bound) == 1 and None not in bound:
        return bound.pop()
    # a plain name is a setting where the file gives it a default (a parameter, an option)
    return name if not plain or _defaults(model, name) else None


def _accelerate_setting(model: FileModel) -> str | None:
    """The option handed to ``Accelerator(gradient_accumulation_steps=args.accum)``: inside
    ``accumulate()`` the prepared optimizer steps every that many micro-batches."""
    found = accumulation_setting(model)
    if found is None or found[0].keyword is None:
        return None
    name = dotted(found[0].value)
    if name is None:
        return None
    # a plain name is a setting where the file gives it a default (`def main(..., gradient_accumulation_steps=1)`)
    return name if "." in name or _defaults(model, name) else None


def _keyed(model: FileModel, modulus: cst.BaseExpression) -> str | None:
    """``cfg['accumulate_grad_batches']``: a configuration value read by its key (a YAML config, the
    dict of ``vars(args)``), unless the file binds it to a literal (``cfg = {"accum": 4}``)."""
    key = _key(modulus)
    if key is None or not isinstance(modulus, cst.Subscript):
        return None
    inner = modulus.value
    while type(inner) is cst.Subscript and _key(inner) is not None:
        inner = inner.value  # `cfg_dict["train_params"]["grad_accumulation"]`: a nested config's key
    base = dotted(inner)
    if base is None:
        return None
    if inner is not modulus.value:
        return f"{source(modulus.value)}[{modulus.slice[0].slice.value.value}]"  # type: ignore[attr-defined]
    for value in model.index.values.get(last_part(base), []):
        if isinstance(value, cst.Dict) and any(
                isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                and e.key.evaluated_value == key and int_value(e.value) is not None for e in value.elements):
            return None
    return f"{base}[{modulus.slice[0].slice.value.value}]"  # type: ignore[attr-defined]


def _key(modulus: cst.BaseExpression) -> str | None:
    if not isinstance(modulus, cst.Subscript) or len(modulus.slice) != 1:
        return None
    index = modulus.slice[0].slice
    if not isinstance(index, cst.Index) or not isinstance(index.value, cst.SimpleString):
        return None
    key = index.value.evaluated_value
    return key if isinstance(key, str) else None


def _nested(setting: str) -> bool:
    """``config.optimizer.iter_size`` and ``cfg["train"]["accum"]`` are keys of a configuration tree; the
    ``args.accum`` of a flat namespace (also as a trainer keeps it, ``self.args.accum``) is not."""
    return len(re.split(r"\.|\[", setting.removeprefix("self."))) > 2


def _setting_name(setting: str) -> str:
    """The name a setting's default is given under: ``accum`` for ``args.accum`` and ``cfg['accum']``."""
    if setting.endswith("]") and "[" in setting:
        return setting[setting.rindex("[") + 2:-2]  # `cfg["train_params"]["accum"]`: the last key
    return last_part(setting)


def _default(model: FileModel, name: str) -> int | None:
    found = _defaults(model, name)
    return found.pop() if len(found) == 1 and None not in found else None


def _defaults(model: FileModel, name: str) -> set[int | None]:
    """The defaults the file gives the setting ``name``: an argparse option's ``default=``, a config
    class's field (``gradient_accumulation_steps: int = 1``), a function parameter's default."""
    found: set[int | None] = {int_value(default) for option, default in option_defaults(model.index) if option == name}
    found |= _field_values(_class_statements(model.module), name)
    for fns in model.index.functions.values():
        for fn in fns:
            for param in [*fn.params.params, *fn.params.kwonly_params]:
                if param.name.value == name and param.default is not None:
                    found.add(int_value(param.default))
    return found


def _field_values(statements: list[cst.BaseSmallStatement], name: str) -> set[int | None]:
    """The integers (None: not one) a class body's ``statements`` give its field ``name`` (``name = 1``,
    ``name: int = 1``)."""
    found: set[int | None] = set()
    for stmt in statements:
        if isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
            target: cst.BaseExpression = stmt.target
        elif isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0].target
        else:
            continue
        if isinstance(target, cst.Name) and target.value == name:
            found.add(int_value(stmt.value))
    return found


def _class_statements(module: cst.Module) -> list[cst.BaseSmallStatement]:
    out: list[cst.BaseSmallStatement] = []
    stack = [s for s in module.body if isinstance(s, cst.ClassDef)]
    while stack:
        cls = stack.pop()
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.ClassDef):
                stack.append(stmt)
            elif isinstance(stmt, cst.SimpleStatementLine):
                out.extend(stmt.body)
    return out
