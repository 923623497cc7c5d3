"""The mutation operators of bench/mutation.py: where a module can take a realistic defect, and the
source text of each mutant.

A mutant is one small edit of the source text (not an ast.unparse of the whole module), so the
rest of the file keeps its bytes and its line numbers: tracebacks, line-counting tests and the
pyc cache see the file as it is, bar the one edit.

Operators: `cmp` (< <=, > >=, == !=, is / is not, in / not in), `arith` (+ -, * /, // to /, and
the augmented forms), `bool` (and / or), `not` (dropped), `const` (int n -> n+1, True / False),
`return` (return X -> return None, X not a constant) and `drop` (a simple statement of an if /
else / loop / except body replaced by `pass`); `const` also shifts slice and index bounds by one.
Not mutated, as no user relies on their exact form: docstrings, type annotations, decorators,
f-strings and string building (message text), `print(...)` and logging calls, `if TYPE_CHECKING:`
blocks, `__all__`, and assert messages.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

# comparison: (its text, the regex that finds it between the operands, the flipped text)
CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
CMP = {op: (t, re.escape(t)) for op, t in CMP.items()}
CMP |= {ast.Is: ("is", r"\bis\b"), ast.IsNot: ("is not", r"\bis\s+not\b")}
CMP |= {ast.In: ("in", r"\bin\b"), ast.NotIn: ("not in", r"\bnot\s+in\b")}
FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
FLIP |= {"is": "is not", "is not": "is", "in": "not in", "not in": "in"}
ARITH = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*")}
ARITH[ast.FloorDiv] = ("//", "/")
LOGGERS = {"logging", "logger", "log", "LOG", "_log"}
SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Delete)
SIMPLE += (ast.Continue, ast.Break)


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    end_line: int
    scope: str  # enclosing qualname: with op/original/mutated, a key that survives line shifts
    op: str
    original: str
    mutated: str
    start: int  # byte offsets of the edit in the file
    end: int
    text: bytes

    @property
    def key(self) -> str:
        return f"{self.path}::{self.scope}::{self.op}: {self.original} -> {self.mutated}"

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.text + source[self.end :]


def _is_text(node: ast.AST) -> bool:
    """A string or sequence literal: `+` / `%` on it builds text or a list, not a number."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    return isinstance(node, ast.JoinedStr | ast.List | ast.Tuple | ast.ListComp)


def _is_output(stmt: ast.stmt) -> bool:
    """`print(...)` or `logging.x(...)` / `logger.x(...)`: a line only a reader of logs sees."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    f = stmt.value.func
    return (isinstance(f, ast.Name) and f.id == "print") or (
        isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in LOGGERS
    )


class _Finder(ast.NodeVisitor):
    def __init__(self, path: str, source: bytes):
        self.path, self.src, self.out, self.scope = path, source, [], []
        self.starts = [0]
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def off(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)

    def text(self, a: int, b: int) -> str:
        return self.src[a:b].decode()

    def add(self, node: ast.AST, op: str, a: int, b: int, new: str, shown: tuple[str, str] | None = None):
        old = self.text(a, b)
        shown = shown or (" ".join(old.split()), " ".join(new.split()))
        scope = ".".join(self.scope) or "<module>"
        line, end = node.lineno, node.end_lineno
        self.out.append(Mutant(self.path, line, end, scope, op, *shown, a, b, new.encode()))

    def gap_op(self, node, left, right, pattern: str, new: str, op: str, shown: tuple[str, str]):
        """Replace the operator token between two operands (what lies between: spaces, parens)."""
        a, b = self.off(left.end_lineno, left.end_col_offset), self.off(right.lineno, right.col_offset)
        m = re.search(rf"(?<![<>=!*/]){pattern}(?![=*/])", self.text(a, b))
        if m:
            self.add(node, op, a + m.start(), a + m.end(), new, shown)

    # -- context: what is skipped, and the enclosing scope ---------------------------------------
    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)  # defaults yes; annotations, decorators and the return type no
        self.body(node.body)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.body(node.body)
        self.scope.pop()

    def body(self, stmts: list[ast.stmt]):
        for i, s in enumerate(stmts):
            docstring = i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
            if not (docstring or _is_output(s)):
                self.visit(s)

    def visit_Module(self, node):
        self.body(node.body)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)

    def visit_Assign(self, node):
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            self.generic_visit(node)

    def visit_Assert(self, node):
        self.visit(node.test)

    def visit_JoinedStr(self, node):
        pass

    def visit_If(self, node):
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self.visit(node.test)
        self.branch(node.body)
        self.branch(node.orelse)

    def visit_For(self, node):
        self.visit(node.target)
        self.visit(node.iter)
        self.branch(node.body)
        self.body(node.orelse)

    def visit_While(self, node):
        self.visit(node.test)
        self.branch(node.body)
        self.body(node.orelse)

    def visit_ExceptHandler(self, node):
        self.branch(node.body)

    def visit_With(self, node):
        for item in node.items:
            self.visit(item)
        self.body(node.body)

    def visit_Try(self, node):
        self.body(node.body)
        for h in node.handlers:
            self.visit(h)
        self.body(node.orelse)
        self.body(node.finalbody)

    def branch(self, stmts: list[ast.stmt]):
        """`drop`: each simple statement of a branch's body, replaced by `pass` (same line count)."""
        for s in stmts:
            if isinstance(s, SIMPLE) and not _is_output(s):
                a, b = self.span(s)
                old = " ".join(self.text(a, b).split())
                old = old if len(old) <= 72 else old[:69] + "..."
                self.add(s, "drop", a, b, "pass" + "\n" * (s.end_lineno - s.lineno), (old, "pass"))
        self.body(stmts)

    # -- the operators -------------------------------------------------------------------------------
    def visit_Compare(self, node):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if type(op) in CMP:
                old, pattern = CMP[type(op)]
                self.gap_op(node, left, right, pattern, FLIP[old], "cmp", (old, FLIP[old]))
            left = right
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if type(node.op) in ARITH and not (_is_text(node.left) or _is_text(node.right)):
            old, new = ARITH[type(node.op)]
            self.gap_op(node, node.left, node.right, re.escape(old), new, "arith", (old, new))
        if not (isinstance(node.op, ast.Mod) and _is_text(node.left)):  # '%' formatting: text
            self.generic_visit(node)

    def visit_AugAssign(self, node):
        if type(node.op) in ARITH and not _is_text(node.value):
            old, new = ARITH[type(node.op)]
            self.gap_op(
                node,
                node.target,
                node.value,
                re.escape(old + "="),
                new + "=",
                "arith",
                (old + "=", new + "="),
            )
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        a, b = self.span(node)
        text = self.text(a, b)
        parts, prev = [], a
        for left, right in zip(node.values, node.values[1:]):
            x, y = self.off(left.end_lineno, left.end_col_offset), self.off(right.lineno, right.col_offset)
            gap = re.sub(rf"\b{word}\b", other, self.text(x, y), count=1)
            parts += [self.text(prev, x), gap]
            prev = y
        parts.append(self.text(prev, b))
        if "".join(parts) != text:
            self.add(node, "bool", a, b, "".join(parts), (word, other))
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            a, b = self.span(node)
            self.add(node, "not", a, b, "(" + self.text(*self.span(node.operand)) + ")")
        self.generic_visit(node)

    def visit_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            self.add(node, "const", *self.span(node), str(not v))
        elif isinstance(v, int):
            self.add(node, "const", *self.span(node), str(v + 1))

    def visit_Return(self, node):
        v = node.value
        generator = any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(v)) if v else False
        if v is not None and not isinstance(v, ast.Constant) and not generator:
            a, b = self.span(v)
            self.add(node, "return", a, b, "None")
        self.generic_visit(node)


def mutants(path: str, source: bytes) -> list[Mutant]:
    """Every mutant of one module, in file order; each one compiles."""
    finder = _Finder(path, source)
    finder.visit(ast.parse(source))
    out, seen = [], {}
    for m in sorted(finder.out, key=lambda m: (m.start, m.op)):
        try:
            compile(m.apply(source), path, "exec")
        except SyntaxError:
            continue
        n = seen[m.key] = seen.get(m.key, 0) + 1
        out.append(m if n == 1 else replace(m, scope=f"{m.scope}#{n}"))  # the same edit twice in a scope
    return out
