"""Run as `python scan_forms.py DIR...` (a rough syntactic census, not loopcheck). Find (1) scheduler .step() calls at epoch level (nearest loop's body, outside any nested loop, with no backward
at that level) and (2) scheduler constructions whose arguments use len(X) where X was a prepare() target earlier.
Report whether the stepped/constructed scheduler's name is a prepare() target or argument."""
import ast, sys, os

def dotted(n):
    if isinstance(n, ast.Name): return n.id
    if isinstance(n, ast.Attribute):
        d = dotted(n.value); return d + "." + n.attr if d else None
    return None

def is_prepare(call):
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("prepare", "prepare_scheduler")

def targets(t):
    if isinstance(t, (ast.Tuple, ast.List)):
        out = []
        for e in t.elts: out += targets(e)
        return out
    if isinstance(t, ast.Starred): return targets(t.value)
    d = dotted(t); return [d] if d else []

def scan(path):
    try: tree = ast.parse(open(path, encoding="utf-8", errors="replace").read())
    except Exception: return []
    prep_targets, prep_args = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and is_prepare(node.value):
            for t in node.targets:
                for d in targets(t): prep_targets.setdefault(d.split(".")[-1], []).append(node.lineno)
        if is_prepare(node):
            for a in node.args:
                d = dotted(a)
                if d: prep_args.add(d.split(".")[-1])
    if not prep_targets and not prep_args: return []
    out = []
    parents = {}
    for p in ast.walk(tree):
        for c in ast.iter_child_nodes(p): parents[c] = p
    def has_backward(nodes, skip_loops):
        for n in nodes:
            for m in ast.walk(n):
                if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr == "backward":
                    return True
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step":
            recv = dotted(node.func.value)
            if not recv or "sched" not in recv.lower(): continue
            # nearest loop
            p = parents.get(node); loop = None
            while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if isinstance(p, (ast.For, ast.While, ast.AsyncFor)): loop = p; break
                p = parents.get(p)
            if loop is None: continue
            inner = [n for s in loop.body for n in ast.walk(s) if isinstance(n, (ast.For, ast.While))]
            if not inner:
                # an epoch loop that calls a per-epoch function (no nested loop, no backward at its level)
                if not any(isinstance(n, ast.Call) for s_ in loop.body for n in ast.walk(s_) if n is not node):
                    continue
            # backward anywhere inside the loop's nested loops, or a call (a per-epoch function)
            nested_bw = any(has_backward([n], False) for n in inner)
            def level_bw(nodes):
                for n in nodes:
                    if isinstance(n, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)): continue
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward": return True
                    if level_bw(list(ast.iter_child_nodes(n))): return True
                return False
            if level_bw(loop.body): continue
            name = recv.split(".")[-1]
            out.append(f"EPOCHSTEP {path}:{node.lineno} {recv}.step() prepared={'T' if name in prep_targets else ('arg' if name in prep_args else 'F')} nested_backward={nested_bw}")
    assigns = {}
    for a in ast.walk(tree):
        if isinstance(a, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and a.value is not None:
            ts = a.targets if isinstance(a, ast.Assign) else [a.target]
            for t in ts:
                for d in targets(t): assigns.setdefault(d, []).append(a)
    # (2) len(X) after prepare in a scheduler construction or a name used by it
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = dotted(node.func) or ""
            last = fn.split(".")[-1]
            if not ("sched" in last.lower() or last in ("OneCycleLR","CosineAnnealingLR","LinearLR","LambdaLR","StepLR","MultiStepLR","PolynomialLR","CosineAnnealingWarmRestarts")):
                continue
            lens = []
            seen = set(); todo = [(node, node.lineno)]
            while todo:
                expr, line = todo.pop()
                for m in ast.walk(expr):
                    if isinstance(m, ast.Call) and dotted(m.func) == "len" and m.args and dotted(m.args[0]):
                        lens.append((m, line))
                    elif isinstance(m, (ast.Name, ast.Attribute)) and isinstance(getattr(m, 'ctx', None), ast.Load):
                        d = dotted(m)
                        if d and d not in seen:
                            seen.add(d)
                            for a in assigns.get(d, []):
                                if a.lineno < line: todo.append((a.value, a.lineno))
            for m, line in lens:
                x = dotted(m.args[0]).split(".")[-1]
                if x in prep_targets and min(prep_targets[x]) < line:
                    out.append(f"LENAFTER {path}:{node.lineno} {fn}(... len({dotted(m.args[0])}) at line {line} ...) loader prepared-at {prep_targets[x]}")
    return out

for root in sys.argv[1:]:
    for dp, dn, fn in os.walk(root):
        for f in fn:
            if f.endswith(".py"):
                for l in scan(os.path.join(dp, f)): print(l)
