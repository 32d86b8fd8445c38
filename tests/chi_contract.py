"""Check that notebook code only uses python-chi functions and keywords that really exist.

The Chameleon notebooks (01_reserve, 02_provision) run in CI only against a fake Chameleon
(tests/test_chameleon_notebooks.py); this module adds a static check: it reads their code with
`ast`, follows what each name refers to (`import chi`, `from chi import server`,
`s = server.Server(...)`, ...) and checks every call into python-chi against
`inspect.signature` of the installed package: the attribute must exist, and the call's keywords
and number of positional arguments must bind. An upgrade of python-chi that renames or removes
something the notebooks use then fails the test suite instead of a student's lease. Calls whose
default is wrong for a class (REQUIRED_KEYWORDS) must pass the keyword that avoids it.

    python -m chi_contract notebooks/01_reserve.ipynb notebooks/02_provision.ipynb
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

ROOT_PACKAGE = "chi"
# python-chi methods whose default does harm here, with the keyword (and value) each call must
# pass. Server.delete(delete_ips=True), the default, deletes the server's floating IPs first,
# in 1.2.10 by a DELETE to a Neutron path that does not exist (openstacksdk's conn.network.delete
# on the bare id); were it fixed, it would throw away the IP reserved with the lease. Server.
# detach_floating_ip(delete=True) does the same to the one IP it detaches.
REQUIRED_KEYWORDS = {
    "chi.server.Server.delete": ("delete_ips", "False"),
    "chi.server.Server.detach_floating_ip": ("delete", "False"),
}


@dataclass(frozen=True)
class Problem:
    where: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.message}"


def _strip_magics(source: str) -> str:
    """Turn IPython lines (%magic, !shell) into `pass` so the cell parses as Python."""
    out = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            out.append(line[: len(line) - len(stripped)] + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def notebook_code(path: Path) -> str:
    """All code cells of a .ipynb (or a jupytext .py file as it is), magics neutralised."""
    path = Path(path)
    if path.suffix == ".ipynb":
        import nbformat

        nb = nbformat.read(path, as_version=4)
        cells = [c.source for c in nb.cells if c.cell_type == "code"]
        return "\n\n".join(_strip_magics(c) for c in cells)
    return _strip_magics(path.read_text())


class _Checker(ast.NodeVisitor):
    def __init__(self, where: str, root_module):
        self.where = where
        self.root = root_module
        self.names: dict[str, object] = {}  # local name -> python-chi module/function/class
        self.instances: dict[str, type] = {}  # local name -> python-chi class of its value
        self.problems: list[Problem] = []
        self.checked_calls = 0
        self.guarded_calls: list[str] = []  # REQUIRED_KEYWORDS calls seen, passing or not

    # ---- what a name or expression refers to
    def _import(self, dotted: str):
        parts = dotted.split(".")
        obj = self.root
        for part in parts[1:]:
            if not hasattr(obj, part):
                try:
                    obj = (
                        importlib.import_module(f"{obj.__name__}.{part}")
                        if inspect.ismodule(obj)
                        else None
                    )
                except ImportError:
                    obj = None
                if obj is None:
                    return None
            else:
                obj = getattr(obj, part)
        return obj

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            if top != ROOT_PACKAGE:
                continue
            target = self._import(alias.name)
            if target is None:
                self._problem(node, f"module {alias.name} does not exist in python-chi")
                continue
            if alias.asname:
                self.names[alias.asname] = target
            else:
                self.names[top] = self.root

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if not node.module or node.module.split(".")[0] != ROOT_PACKAGE:
            return
        base = self._import(node.module)
        if base is None:
            self._problem(node, f"module {node.module} does not exist in python-chi")
            return
        for alias in node.names:
            obj = getattr(base, alias.name, None)
            if obj is None:
                obj = self._import(f"{node.module}.{alias.name}")
            if obj is None:
                self._problem(node, f"{node.module} has no {alias.name}")
                continue
            self.names[alias.asname or alias.name] = obj

    def _resolve(self, expr: ast.expr):
        """The python-chi object an expression names, or None when it is not python-chi's."""
        if isinstance(expr, ast.Name):
            return self.names.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self._resolve(expr.value)
            if base is not None:
                if hasattr(base, expr.attr):
                    return getattr(base, expr.attr)
                if inspect.ismodule(base):
                    sub = self._import(f"{base.__name__}.{expr.attr}")
                    if sub is not None:
                        return sub
                self._problem(expr, f"{_name(base)} has no attribute {expr.attr!r}")
                return None
        return None

    def _instance_class(self, expr: ast.expr):
        if isinstance(expr, ast.Name):
            return self.instances.get(expr.id)
        return None

    # ---- assignments: remember which python-chi class a variable holds
    def visit_Assign(self, node: ast.Assign):
        self.generic_visit(node)
        cls = self._returns_class(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if cls is not None:
                    self.instances[target.id] = cls
                else:
                    self.instances.pop(target.id, None)
                    self.names.pop(target.id, None)
            elif isinstance(target, ast.Attribute):
                owner = self._resolve(target.value)
                if inspect.ismodule(owner) and not hasattr(owner, target.attr):
                    self._problem(
                        target, f"{owner.__name__} has no attribute {target.attr!r} to set"
                    )

    def _returns_class(self, value: ast.expr):
        if isinstance(value, ast.IfExp):  # `x = server.get_server(n) if ... else None`
            return self._returns_class(value.body) or self._returns_class(value.orelse)
        if not isinstance(value, ast.Call):
            return None
        func = self._resolve(value.func)
        if inspect.isclass(func) and func.__module__.startswith(ROOT_PACKAGE):
            return func
        method_owner = (
            self._instance_class(value.func.value)
            if isinstance(value.func, ast.Attribute)
            else None
        )
        if method_owner is not None:
            func = getattr(method_owner, value.func.attr, None)
        if callable(func):
            return _chi_return_class(func)
        return None

    # ---- calls
    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        func = node.func
        target, label, bound_method = None, None, False
        if isinstance(func, ast.Attribute) and self._instance_class(func.value) is not None:
            cls = self._instance_class(func.value)
            label = f"{cls.__name__}.{func.attr}"
            if not hasattr(cls, func.attr):
                self._problem(node, f"{cls.__module__}.{label} does not exist")
                return
            target = getattr(cls, func.attr)
            static = inspect.getattr_static(cls, func.attr)
            bound_method = not isinstance(static, (staticmethod, classmethod))
            self._check_required(node, f"{cls.__module__}.{cls.__qualname__}.{func.attr}", label)
        else:
            target = self._resolve(func)
            if target is None:
                return
            label = ast.unparse(func)
        if not callable(target):
            self._problem(node, f"{label} is not callable")
            return
        self._check_call(node, target, label, bound_method)

    def _check_required(self, node: ast.Call, full_name: str, label: str):
        if full_name not in REQUIRED_KEYWORDS:
            return
        self.guarded_calls.append(label)
        keyword, value = REQUIRED_KEYWORDS[full_name]
        passed = {k.arg: ast.unparse(k.value) for k in node.keywords}
        if passed.get(keyword) != value:
            self._problem(
                node,
                f"{label}() must pass {keyword}={value}: python-chi's default does harm here "
                "(see REQUIRED_KEYWORDS in tests/chi_contract.py)",
            )

    def _check_call(self, node: ast.Call, target, label: str, bound_method: bool):
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            return
        self.checked_calls += 1
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            positional = (
                None  # *args / **kwargs at the call site: only named keywords can be checked
            )
        else:
            positional = len(node.args)
        params = sig.parameters
        accepts_var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for kw in node.keywords:
            if kw.arg is None:
                continue
            p = params.get(kw.arg)
            if p is None and not accepts_var_kw:
                self._problem(
                    node,
                    f"{label}() has no keyword {kw.arg!r} (python-chi signature: {label}{sig})",
                )
            elif p is not None and p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
                self._problem(node, f"{label}() cannot take {kw.arg!r} as a keyword")
        if positional is not None:
            dummy = [None] * (positional + (1 if bound_method else 0))
            try:
                sig.bind_partial(*dummy, **{k.arg: None for k in node.keywords if k.arg in params})
            except TypeError as exc:
                self._problem(node, f"{label}{sig} does not accept this call: {exc}")

    def _problem(self, node: ast.AST, message: str):
        self.problems.append(Problem(self.where, getattr(node, "lineno", 0), message))


def _name(obj) -> str:
    if inspect.ismodule(obj):
        return obj.__name__
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _chi_return_class(func):
    """The python-chi class a function is annotated to return (Optional/Union unwrapped)."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        return None
    ret = hints.get("return")
    candidates = typing.get_args(ret) or (ret,)
    for c in candidates:
        if inspect.isclass(c) and getattr(c, "__module__", "").startswith(ROOT_PACKAGE):
            return c
    return None


@dataclass
class Report:
    problems: list[Problem]
    checked_calls: int
    guarded_calls: list[str]


def check_source(source: str, where: str = "<source>", root_module=None) -> Report:
    """Check one piece of Python code; root_module replaces the real `chi` (for tests)."""
    if root_module is None:
        root_module = importlib.import_module(ROOT_PACKAGE)
    checker = _Checker(where, root_module)
    checker.visit(ast.parse(source, filename=where))
    return Report(checker.problems, checker.checked_calls, checker.guarded_calls)


def check_notebook(path: Path | str, root_module=None) -> Report:
    return check_source(notebook_code(Path(path)), str(path), root_module)


def main(argv: list[str]) -> int:
    failed = False
    for arg in argv:
        report = check_notebook(arg)
        for p in report.problems:
            print(p)
        failed |= bool(report.problems)
        print(
            f"{arg}: {report.checked_calls} python-chi calls checked, "
            f"{len(report.problems)} problem(s)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
