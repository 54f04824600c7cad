#!/usr/bin/env python3
"""Fails on an import circle among hora's Python modules (python/hora).

    scripts/check_imports.py [ROOT]     (default: python/ of this checkout)

Every `import` and `from ... import` of a hora module counts, at module level or inside a
function: an import moved into a function to break a circle still leaves two modules that each
need the other, which is the design problem this check is about (a reader cannot tell which one
is the base). `from PKG import NAME` counts as an import of PKG.NAME when that is a module, else
of PKG. A package's __init__ importing its own submodules is the usual direction; a submodule
importing names back from its package's __init__ closes a circle and is reported.

Prints each circle as `a -> b -> a` and exits 1 when there is one; scripts/test.sh runs it, as
scripts/check_layers.py checks cli/'s folders.
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules(root):
    """module name -> path for every .py file under root/hora."""
    found = {}
    for folder, _, names in os.walk(os.path.join(root, "hora")):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            mod = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            if mod.endswith(".__init__"):
                mod = mod[:-len(".__init__")]
            found[mod] = path
    return found


def imports(mod, path, known):
    """The hora modules that mod imports, each with the line of its first import."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    package = mod if is_package else mod.rpartition(".")[0]
    out = {}

    def add(target, line):
        while target and target not in known:  # hora.torch.mpi_ops.allreduce -> hora.torch.mpi_ops
            target = target.rpartition(".")[0]
        if target and target != mod:
            out.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "hora":
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "hora":
                continue
            for alias in node.names:
                full = source + "." + alias.name
                if full in known:
                    add(full, node.lineno)
                elif source in known and alias.name not in defined(known[source]):
                    # A compiled extension or a generated module beside the package's files
                    # (hora.torch._hora_torch): not the package's __init__.
                    continue
                else:
                    add(source, node.lineno)
    return out


_DEFINED = {}


def defined(path):
    """The names a module binds at its top level (definitions, assignments, imports)."""
    if path not in _DEFINED:
        names = set()
        for node in ast.parse(open(path, encoding="utf-8").read(), path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            else:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        names.add(sub.id)
        _DEFINED[path] = names
    return _DEFINED[path]


def circles(graph):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def path_in(component, graph):
    """One circle through the component's first module, as a list ending where it starts."""
    start = component[0]
    members = set(component)
    seen = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, {})):
            if w == start:
                walk = [v]
                while seen[walk[-1]] is not None:
                    walk.append(seen[walk[-1]])
                return list(reversed(walk)) + [start]
            if w in members and w not in seen:
                seen[w] = v
                queue.append(w)
    return component


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "python")
    known = modules(root)
    graph = {m: imports(m, p, known) for m, p in known.items()}
    found = circles(graph)
    for component in found:
        walk = path_in(component, graph)
        steps = ["%s (%s:%d)" % (a, os.path.relpath(known[a], ROOT), graph[a][b])
                 for a, b in zip(walk, walk[1:])]
        print("check_imports: an import circle: %s -> %s" % (" -> ".join(steps), walk[-1]))
        if len(component) > len(walk) - 1:
            print("  (its modules: %s)" % ", ".join(component))
    if found:
        print("check_imports: make the imports go one way: move what both need into a module "
              "that imports neither (e.g. a _core.py for the extension's wrappers)")
        return 1
    print("check_imports: %d modules, no import circle" % len(known))
    return 0


if __name__ == "__main__":
    sys.exit(main())
