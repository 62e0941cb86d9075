"""
The package's import graph (issue 27): imports point down, so no module imports itself back through others.

Every ``import`` / ``from ... import`` of a ``sb3_pref`` module counts, at module level or inside a function
(a deferred import that closes a circle is still one), except those under ``if TYPE_CHECKING:``, which never run.
"""

import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "sb3_pref")

#: circles not yet taken apart (none: the grid runner's run kinds now sit above a registry, issue 27)
KNOWN_CIRCLES: list[set[str]] = []


def module_files() -> dict[str, str]:
    """``{dotted module name: path}`` of every module of the package (a package by its ``__init__``)."""
    modules = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], REPO).replace(os.sep, ".")
                modules[dotted.removesuffix(".__init__")] = path
    return modules


def imported_modules(path: str, module: str, modules: dict[str, str], type_only: bool = False) -> set[str]:
    """
    The package's modules that ``module`` imports (each name resolved to the longest module it names); with
    ``type_only``, also those imported under ``if TYPE_CHECKING:``.
    """

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and not type_only:
                continue
            if isinstance(child, ast.Import):
                found.update(resolve(alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                found.update(resolve(f"{base}.{alias.name}") for alias in child.names)
            visit(child)

    visit(ast.parse(open(path, encoding="utf-8").read()))
    return {name for name in found if name.startswith("sb3_pref") and name != module}


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_circle_finder_finds_a_deferred_circle_and_ignores_type_checking(tmp_path):
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(edges) == [{"a", "b", "c"}]
    (tmp_path / "m.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sb3_pref.x import A\n"
        "def f():\n    from sb3_pref.y.z import B\n    import sb3_pref.w\n"
    )
    modules = {"sb3_pref.x": "", "sb3_pref.y": "", "sb3_pref.y.z": "", "sb3_pref.w": "", "sb3_pref.m": ""}
    assert imported_modules(str(tmp_path / "m.py"), "sb3_pref.m", modules) == {"sb3_pref.y.z", "sb3_pref.w"}


def test_no_new_import_circles():
    modules = module_files()
    edges = {name: imported_modules(path, name, modules) for name, path in modules.items()}
    assert len(modules) > 80 and edges["sb3_pref.common.algorithm"] >= {"sb3_pref.core.learner"}
    found = circles(edges)
    new = [sorted(circle) for circle in found if circle not in KNOWN_CIRCLES]
    gone = [sorted(circle) for circle in KNOWN_CIRCLES if circle not in found]
    assert not new, f"imports that lead back to their module (make them point down): {new}"
    assert not gone, f"a known circle was taken apart or changed: update KNOWN_CIRCLES to {[sorted(c) for c in found]}"


def test_no_circles_even_through_type_only_imports():
    """Type-only imports (``if TYPE_CHECKING:``) close no circle either (issue 43): shared types live below their users
    (e.g. ``ad/persistence.py`` types the model it saves with a Protocol instead of importing ``ad/ad.py``)."""
    modules = module_files()
    edges = {name: imported_modules(path, name, modules, type_only=True) for name, path in modules.items()}
    assert edges["sb3_pref.experiments.registry"] >= {"sb3_pref.experiments.spec"}  # a type-only import, counted
    assert circles(edges) == []


def test_the_developer_page_lists_the_core_bottom_up():
    """``docs/dev/core-interfaces.md`` names every module of ``sb3_pref/core`` and ``sb3_pref/common`` in an order
    its imports follow, the core's first."""
    import re

    with open(os.path.join(REPO, "docs", "dev", "core-interfaces.md"), encoding="utf-8") as handle:
        order = re.findall(r"^\| `(core|common)/(\w+)\.py` \|", handle.read(), flags=re.MULTILINE)
    modules = module_files()
    position = {f"sb3_pref.{room}.{name}": index for index, (room, name) in enumerate(order)}
    rooms = ("sb3_pref.core.", "sb3_pref.common.")
    assert set(position) == {name for name in modules if name.startswith(rooms)}
    assert [room for room, _ in order] == sorted((room for room, _ in order), key=lambda room: room != "core")
    upward = [
        f"{name} imports {imported}"
        for name, index in position.items()
        for imported in imported_modules(modules[name], name, modules)
        if position.get(imported, -1) > index
    ]
    assert not upward, f"imports below their module in the page's table (fix the import or the table): {upward}"


def test_the_core_imports_no_glue_and_no_sb3_algorithm():
    """The preference core is the same for every algorithm: it imports nothing of the glue, the algorithms or the
    tooling of this package, and of SB3 only its utilities (no algorithm, buffer or policy)."""
    modules = module_files()
    core = [name for name in modules if name.startswith("sb3_pref.core.")]
    assert len(core) >= 15
    leaks = [
        f"{name} imports {imported}"
        for name in core
        for imported in imported_modules(modules[name], name, modules)
        if not imported.startswith("sb3_pref.core")
    ]
    sb3_allowed = ("stable_baselines3.common.running_mean_std", "stable_baselines3.common.preprocessing")
    for name in core:
        tree = ast.parse(open(modules[name], encoding="utf-8").read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            leaks += [
                f"{name} imports {found}"
                for found in names
                if found.startswith(("stable_baselines3", "sb3_contrib")) and found not in sb3_allowed
            ]
    assert not leaks, f"the core must not lean on the glue or SB3's algorithms: {leaks}"


#: the grid runner in general: configs, runs, records, backends, reports; knows run kinds only through the registry
GRID_GENERAL = ("axes", "backends", "config", "records", "registry", "report", "report_text", "results", "runner", "spec",
                "stats", "training")  # fmt: skip


def test_the_grid_in_general_imports_no_run_kind_and_no_bpref_script_layer():
    """``experiments/`` has a general grid (the modules above) that asks for a kind by name, one module per run kind
    (``ppo_runs``, ``pebble_runs``, ``rl2_runs``, ``ad_runs``) and the B-Pref script layer (``flags``, ``bpref``,
    ``pebble``, ``defaults``): a new kind or a changed B-Pref flag touches no general module."""
    modules = module_files()
    general = {f"sb3_pref.experiments.{name}" for name in GRID_GENERAL}
    assert general <= set(modules), f"listed but missing: {sorted(general - set(modules))}"
    package_modules = {name for name in modules if name.startswith("sb3_pref.experiments.")}
    others = package_modules - general - {"sb3_pref.experiments.__main__"}
    assert {"sb3_pref.experiments.ppo_runs", "sb3_pref.experiments.flags", "sb3_pref.experiments.kinds"} <= others
    leaks = sorted(
        f"{name} imports {imported}"
        for name in general
        for imported in imported_modules(modules[name], name, modules)
        if imported in others
    )
    assert not leaks, f"the general grid must reach kinds through the registry only: {leaks}"
