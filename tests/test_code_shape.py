"""The shape the code keeps: no function over 80 lines, in app/'s Python and in the page's
JavaScript (app/api/static/js/), so that each can be read whole. A module is judged by what
it holds, not by its length: there is no cap on its lines.

A unit's length is counted from its first line to its last, blank lines and comments
included. Python is measured with the standard library's ast: a function runs from its
`def` line (decorators are NOT counted) to its last line (`end_lineno - lineno + 1`);
methods and nested functions are functions too. A class is not a function: its methods
are measured one by one.

The project installs no JavaScript tooling (and V8 in Chromium exposes no syntax tree), so
the page's modules are measured by the small scanner below: it reads strings, template literals (and
the code inside their `${...}`), comments and regular-expression literals as what they are,
so a bracket inside one of them never counts, then pairs the brackets. A function is a
`function` declaration or expression, a method of a class or an object literal (getters
included), or an arrow function (a block body runs to its `}`, an expression body to the
`,` `;` or closing bracket that ends it). The self-tests at the end prove it on the tricky
cases; on the page's modules it found the same functions, line for line, as the acorn
parser did when this test was written. What it assumes of the page's code, which is ours:
statements end with `;` (an arrow with an expression body is not ended by a bare line
break), and a regular expression never directly follows a `)`, `]` or `}` (after those a
`/` is read as division)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
PAGE_JS = APP / "api" / "static" / "js"
MAX_FUNCTION = 80


@dataclass(frozen=True)
class Unit:
    """A function found in a module: its qualified name and first and last lines."""

    name: str
    first: int
    last: int

    @property
    def lines(self) -> int:
        return self.last - self.first + 1


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def too_long(path: Path, units: list[Unit]) -> list[str]:
    return [
        f"{relative(path)}: {u.name} is {u.lines} lines (lines {u.first}-{u.last}; "
        f"at most {MAX_FUNCTION})"
        for u in units
        if u.lines > MAX_FUNCTION
    ]


def long_functions(paths: list[Path], measure: Callable[[str], list[Unit]]) -> list[str]:
    found = []
    for path in paths:
        found += too_long(path, measure(path.read_text(encoding="utf-8")))
    return found


# ---- Python --------------------------------------------------------------------------------


def python_modules() -> list[Path]:
    return sorted(APP.rglob("*.py"))


def python_functions(source: str) -> list[Unit]:
    """Every function and method, nested ones included, named by where it is
    (`Class.method`, `outer.inner`); from its `def` line, decorators excluded."""
    units: list[Unit] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                units.append(Unit(name, child.lineno, child.end_lineno))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return units


def test_no_python_function_of_app_is_over_80_lines() -> None:
    offenders = long_functions(python_modules(), python_functions)
    assert not offenders, "split these functions:\n" + "\n".join(offenders)


# ---- JavaScript: the scanner ---------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    kind: str  # "name", "number", "string", "template", "regex" or "punct"
    text: str
    line: int  # where it starts
    end: int  # where it ends (a string or template may span lines)


OPERATORS = sorted(
    (
        ">>>= ... === !== **= <<= >>= >>> => == != <= >= && || ?? ?. ++ -- += -= *= /= %= "
        "&= |= ^= ** << >> &&= ||= ??="
    ).split(),
    key=len,
    reverse=True,
)
# After these words an expression starts, so a `/` opens a regular expression.
BEFORE_EXPRESSION = {
    "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case",
    "do", "else", "yield", "await",
}  # fmt: skip
CLOSERS = {")", "]", "}"}
PAIRS = {"(": ")", "[": "]", "{": "}", "${": "}"}


class ScanError(ValueError):
    pass


class Scanner:
    """A module's tokens, comments left out: a string, a template's text or a regular
    expression is one token; a template's `${`, the code inside and its `}` are tokens of
    their own, so the brackets of that code pair like any others."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0
        self.line = 1
        self.tokens: list[Token] = []
        self.braces: list[str] = []  # "{" or "${" per open brace: where its `}` returns

    def tokens_of(self) -> list[Token]:
        while self.pos < len(self.source):
            self.step()
        if self.braces:
            raise ScanError("a `{` is never closed")
        return self.tokens

    def fail(self, what: str) -> ScanError:
        return ScanError(f"line {self.line}: {what}")

    def step(self) -> None:
        source, pos = self.source, self.pos
        ch = source[pos]
        if ch.isspace():
            if ch == "\n":
                self.line += 1
            self.pos += 1
        elif source.startswith("//", pos):
            stop = source.find("\n", pos)
            self.pos = len(source) if stop < 0 else stop
        elif source.startswith("/*", pos):
            stop = source.find("*/", pos + 2)
            if stop < 0:
                raise self.fail("a comment never ends")
            self.line += source.count("\n", pos, stop)
            self.pos = stop + 2
        elif ch in "'\"":
            self.emit("string", self.quoted(ch))
        elif ch == "`":
            self.template(pos + 1)
        elif ch == "/" and self.regex_allowed():
            self.emit("regex", self.regex())
        elif ch.isdigit() or (ch == "." and source[pos + 1 : pos + 2].isdigit()):
            self.emit("number", self.word(pos + 1, "._"))
        elif ch.isalpha() or ch in "_$#":
            self.emit("name", self.word(pos + 1, "_$"))
        else:
            self.punct(ch)

    def emit(self, kind: str, stop: int) -> None:
        text = self.source[self.pos : stop]
        end = self.line + text.count("\n")
        self.tokens.append(Token(kind, text, self.line, end))
        self.line, self.pos = end, stop

    def punct(self, ch: str) -> None:
        op = next((o for o in OPERATORS if self.source.startswith(o, self.pos)), ch)
        if op == "}" and not self.braces:
            raise self.fail("a `}` closes nothing")
        self.emit("punct", self.pos + len(op))
        if op == "{":
            self.braces.append("{")
        elif op == "}" and self.braces.pop() == "${":
            self.template(self.pos)  # back in the template's text

    def word(self, k: int, extra: str) -> int:
        while k < len(self.source) and (self.source[k].isalnum() or self.source[k] in extra):
            k += 1
        return k

    def regex_allowed(self) -> bool:
        if not self.tokens:
            return True
        last = self.tokens[-1]
        if last.kind == "punct":
            return last.text not in CLOSERS
        return last.kind == "name" and last.text in BEFORE_EXPRESSION

    def quoted(self, quote: str) -> int:
        """The index past the closing quote of the string that opens here."""
        source, k = self.source, self.pos + 1
        while k < len(source) and source[k] != quote:
            if source[k] == "\n":
                raise self.fail("a string runs past its line")
            k += 2 if source[k] == "\\" else 1
        if k >= len(source):
            raise self.fail("a string never ends")
        return k + 1

    def template(self, k: int) -> None:
        """Emit a template's text, from here (its backtick, or the `}` that ended code in
        it) to its closing backtick or to the `${` that opens code inside it."""
        source = self.source
        while k < len(source):
            if source[k] == "\\":
                k += 2
            elif source[k] == "`":
                self.emit("template", k + 1)
                return
            elif source.startswith("${", k):
                self.emit("template", k)
                self.emit("punct", k + 2)
                self.braces.append("${")
                return
            else:
                k += 1
        raise self.fail("a template literal never ends")

    def regex(self) -> int:
        """The index past the flags of the regular expression that opens here."""
        source, k, in_class = self.source, self.pos + 1, False
        while k < len(source) and source[k] != "\n":
            ch = source[k]
            if ch == "\\":
                k += 1
            elif ch == "[":
                in_class = True
            elif ch == "]":
                in_class = False
            elif ch == "/" and not in_class:
                return self.word(k + 1, "")
            k += 1
        raise self.fail("a regular expression never ends on its line")


def tokenize(source: str) -> list[Token]:
    return Scanner(source).tokens_of()


def pairs(tokens: list[Token]) -> dict[int, int]:
    """Each bracket's index -> the index of its partner (both ways)."""
    partner: dict[int, int] = {}
    open_at: list[int] = []
    for i, token in enumerate(tokens):
        if token.kind != "punct":
            continue
        if token.text in PAIRS:
            open_at.append(i)
        elif token.text in CLOSERS:
            if not open_at or PAIRS[tokens[open_at[-1]].text] != token.text:
                raise ScanError(f"line {token.line}: `{token.text}` closes nothing open")
            opener = open_at.pop()
            partner[opener] = i
            partner[i] = opener
    if open_at:
        raise ScanError(f"line {tokens[open_at[-1]].line}: a bracket is never closed")
    return partner


# `name (...) {` after these is a statement, not a method.
STATEMENTS = {"if", "for", "while", "switch", "catch", "with", "await", "function"}


@dataclass(frozen=True)
class Scope:
    """What an open bracket opened: a function's body (its first line not 0), a class's
    body (named, first line 0), or anything else (no name)."""

    name: str | None = None
    first: int = 0


class Functions:
    """The functions of a module, found from its tokens and their paired brackets."""

    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.partner = pairs(self.tokens)
        self.units: list[Unit] = []
        self.scopes: list[Scope] = []  # one per open bracket
        # Arrows whose expression body has not ended: (brackets open at `=>`, name, first line).
        self.pending: list[tuple[int, str, int]] = []

    def found(self) -> list[Unit]:
        for i, token in enumerate(self.tokens):
            if token.kind == "punct":
                self.visit(i, token)
        self.end_arrows(-1, len(self.tokens) - 1)
        return self.units

    def visit(self, i: int, token: Token) -> None:
        if token.text in CLOSERS:
            self.end_arrows(len(self.scopes) - 1, i - 1)
            scope = self.scopes.pop()
            if scope.first:
                self.units.append(Unit(scope.name or "", scope.first, token.line))
        elif token.text in (",", ";"):
            self.end_arrows(len(self.scopes) - 1, i - 1)
        elif token.text == "=>" and self.text(i + 1) != "{":
            start = self.arrow_start(i)
            name = self.qualified(self.given_name(start, "arrow"))
            self.pending.append((len(self.scopes), name, self.tokens[start].line))
        elif token.text == "{":
            self.scopes.append(self.scope_of(i))
        elif token.text in PAIRS:
            self.scopes.append(Scope())

    def text(self, i: int) -> str:
        return self.tokens[i].text if 0 <= i < len(self.tokens) else ""

    def qualified(self, name: str) -> str:
        outer = [scope.name for scope in self.scopes if scope.name is not None]
        return ".".join([*outer[-1:], name])

    def scope_of(self, brace: int) -> Scope:
        head = self.function_head(brace)
        if head is not None:
            return Scope(self.qualified(head[0]), head[1])
        if self.text(brace - 2) == "class":
            return Scope(self.qualified(self.text(brace - 1)))
        if self.text(brace - 2) == "extends" and self.text(brace - 4) == "class":
            return Scope(self.qualified(self.text(brace - 3)))
        return Scope()

    def given_name(self, start: int, kind: str) -> str:
        """The name of the function whose first token is `start`: `x = ...`, `x: ...`."""
        if self.text(start - 1) in ("=", ":") and self.tokens[start - 2].kind in ("name", "string"):
            return self.tokens[start - 2].text.strip("'\"")
        return f"<{kind} at {self.tokens[start].line}>"

    def arrow_start(self, arrow: int) -> int:
        """The first token of the arrow function whose `=>` is at `arrow`."""
        start = self.partner[arrow - 1] if self.text(arrow - 1) == ")" else arrow - 1
        return start - 1 if self.text(start - 1) == "async" else start

    def function_head(self, brace: int) -> tuple[str, int] | None:
        """(name, first line) when the `{` at `brace` opens a function's body."""
        text = self.text
        if text(brace - 1) == "=>":
            start = self.arrow_start(brace - 1)
            return self.given_name(start, "arrow"), self.tokens[start].line
        if text(brace - 1) != ")":
            return None
        before = self.partner[brace - 1] - 1  # the token before the parameters' `(`
        keyword = before - (1 if text(before) == "*" else 0)
        if text(keyword) == "function":  # function (...) or function* (...): an expression
            start = keyword - (1 if text(keyword - 1) == "async" else 0)
            return self.given_name(start, "function"), self.tokens[start].line
        if before < 0 or self.tokens[before].kind != "name" or text(before) in STATEMENTS:
            return None
        keyword = before - (2 if text(before - 1) == "*" else 1)
        if text(keyword) == "function":  # function name(...) or function* name(...)
            start = keyword - (1 if text(keyword - 1) == "async" else 0)
            return text(before), self.tokens[start].line
        # A method; a `get`, `set`, `static` or `async` before it is on its line.
        return text(before), self.tokens[before].line

    def end_arrows(self, depth: int, last: int) -> None:
        """End at token `last` the pending arrows opened with more than `depth` brackets open."""
        while self.pending and self.pending[-1][0] > depth:
            _, name, first = self.pending.pop()
            self.units.append(Unit(name, first, self.tokens[last].end))


def javascript_functions(source: str) -> list[Unit]:
    """Every function of a module, nested ones included, named by where it is
    (`Class.method`, `outer.inner`; an unnamed one by its line: `outer.<arrow at 12>`)."""
    return Functions(source).found()


# ---- JavaScript: the page's modules --------------------------------------------------------


def javascript_modules() -> list[Path]:
    return sorted(PAGE_JS.glob("*.js"))


def test_no_javascript_function_of_the_page_is_over_80_lines() -> None:
    offenders = long_functions(javascript_modules(), javascript_functions)
    assert not offenders, "split these functions:\n" + "\n".join(offenders)


def test_the_scanner_reads_every_module_of_the_page() -> None:
    """Each module scans with its brackets paired, and its functions are found (each
    `function` keyword of a module opens one of the functions counted)."""
    for path in javascript_modules():
        source = path.read_text(encoding="utf-8")
        tokens = tokenize(source)
        keywords = sum(1 for t in tokens if t.kind == "name" and t.text == "function")
        units = javascript_functions(source)
        assert len(units) >= keywords, relative(path)
        assert all(1 <= u.first <= u.last for u in units), relative(path)


# ---- JavaScript: the scanner proven on the tricky cases ------------------------------------


def spans(source: str) -> dict[str, tuple[int, int]]:
    return {u.name: (u.first, u.last) for u in javascript_functions(source)}


@pytest.mark.parametrize(
    "source",
    [
        'function f() {\n  const s = "}}}";\n  return s;\n}\n',
        "function f() {\n  const s = '{';\n  return s;\n}\n",
        'function f() {\n  const s = "a \\" }";\n  return s;\n}\n',
        "function f() {\n  const t = `}${'{'}`;\n  return t;\n}\n",
        "function f() {\n  const t = `a ${ { b: 1 }.b } }`;\n  return t;\n}\n",
        "function f() {\n  const t = `a ${`inner ${x} }`} {`;\n  return t;\n}\n",
        "function f() {\n  const t = `\n}\n`;\n  return t;\n}\n",
        "function f() {\n  const r = /\\{[}]/g;\n  return r;\n}\n",
        "function f() {\n  const r = /[/{]+}/;\n  return r;\n}\n",
        "function f() {\n  if (/}/.test(x)) return 1;\n  return 2;\n}\n",
        "function f() {\n  return /}/.test(x);\n}\n",
        "function f() {\n  const q = (a / b) / 2; // a } here\n  return q;\n}\n",
        "function f() {\n  /* a { and a } */\n  return 1; /* } */\n}\n",
    ],
)
def test_a_bracket_in_a_string_template_regex_or_comment_does_not_count(source: str) -> None:
    last = source.count("\n")
    assert spans(source) == {"f": (1, last)}


def test_the_scanner_finds_each_kind_of_function() -> None:
    source = "\n".join(
        [
            "export async function load(a, { b } = {}) {",  # 1
            "  const inner = (x) => {",  # 2
            "    return x;",  # 3
            "  };",  # 4
            "  items.forEach((item) => {",  # 5
            "    use(item);",  # 6
            "  });",  # 7
            "  return inner;",  # 8
            "}",  # 9
            "export class View extends Base {",  # 10
            "  constructor() {",  # 11
            "    super();",  # 12
            "  }",  # 13
            "  get open() {",  # 14
            "    return true;",  # 15
            "  }",  # 16
            "  static made(x) {",  # 17
            "    return new View(x);",  # 18
            "  }",  # 19
            "  async *pages() {",  # 20
            "    for await (const p of source) {",  # 21
            "      yield p;",  # 22
            "    }",  # 23
            "  }",  # 24
            "}",  # 25
            "const label = (n) =>",  # 26
            "  n === 1",  # 27
            '    ? "one"',  # 28
            '    : "many";',  # 29
            "const api = { call(x) { return x; }, twice: (x) => x * 2, later: function () {",  # 30
            "  return 0;",  # 31
            "} };",  # 32
            "function* gen() {",  # 33
            "  yield 1;",  # 34
            "}",  # 35
            "el('b', { on: { click: async () => go(1, 2) } });",  # 36
            "const f = x => x",  # 37
            "  + 1;",  # 38
        ]
    )
    assert spans(source) == {
        "load": (1, 9),
        "load.inner": (2, 4),
        "load.<arrow at 5>": (5, 7),
        "View.constructor": (11, 13),
        "View.open": (14, 16),
        "View.made": (17, 19),
        "View.pages": (20, 24),
        "label": (26, 29),
        "call": (30, 30),
        "twice": (30, 30),
        "later": (30, 32),
        "gen": (33, 35),
        "click": (36, 36),
        "f": (37, 38),
    }


def test_control_statements_are_not_functions() -> None:
    source = (
        "function f(x) {\n  if (x) {\n    x++;\n  } else if (y) {\n  }\n"
        "  for (const a of b) {\n  }\n  while (x) {\n  }\n  switch (x) {\n  }\n"
        "  try {\n  } catch (e) {\n  }\n}\n"
    )
    assert spans(source) == {"f": (1, 15)}


def test_the_offender_and_its_length_are_named() -> None:
    long_one = "function long() {\n" + "  step();\n" * 80 + "}\n"
    units = javascript_functions("function short() {\n}\n" + long_one)
    message = too_long(PAGE_JS / "x.js", units)
    assert message == [
        "app/api/static/js/x.js: long is 82 lines (lines 3-84; at most 80)",
    ]


@pytest.mark.parametrize(
    "source",
    ['const s = "never ends;\n', "const t = `never ends;\n", "function f() {\n", "f(]);\n"],
)
def test_what_the_scanner_cannot_read_fails_loudly(source: str) -> None:
    with pytest.raises(ScanError):
        javascript_functions(source)


def test_python_functions_are_measured_from_def_to_their_last_line() -> None:
    source = (
        "@decorator\ndef f():\n    def g():\n        pass\n    return g\n\n\n"
        "class C:\n    async def m(self):\n        return 1\n"
    )
    assert {u.name: (u.first, u.last) for u in python_functions(source)} == {
        "f": (2, 5),
        "f.g": (3, 4),
        "C.m": (9, 10),
    }
