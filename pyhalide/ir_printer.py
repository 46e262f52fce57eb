"""Text form of the IR, laid out as Halide's compile_to_lowered_stmt prints it."""

from __future__ import annotations

from . import ir


def _type_suffix(t) -> str:
    return str(t)


def expr_to_string(e: ir.Expr) -> str:
    return _ExprPrinter().show(e)


class _ExprPrinter:
    def show(self, e) -> str:
        if e is None:
            return "<none>"
        return getattr(self, "p_" + type(e).__name__, self.p_default)(e)

    def p_default(self, e):
        return f"<{type(e).__name__}>"

    def p_IntImm(self, e):
        if e.type.is_bool():
            return "true" if e.value else "false"
        if e.type.bits == 32 and e.type.is_int():
            return str(e.value)
        return f"({e.type}){e.value}"

    def p_FloatImm(self, e):
        return repr(e.value) + {16: "h", 32: "f"}.get(e.type.bits, "")

    def p_StringImm(self, e):
        return repr(e.value)

    def p_Variable(self, e):
        return e.name

    def p_Cast(self, e):
        return f"{e.type}({self.show(e.value)})"

    def p_Reinterpret(self, e):
        return f"reinterpret<{e.type}>({self.show(e.value)})"

    def _bin(self, e):
        if isinstance(e, ir.Min | ir.Max):
            return f"{e.symbol}({self.show(e.a)}, {self.show(e.b)})"
        return f"({self.show(e.a)} {e.symbol} {self.show(e.b)})"

    p_Add = p_Sub = p_Mul = p_Div = p_Mod = p_Min = p_Max = _bin
    p_EQ = p_NE = p_LT = p_LE = p_GT = p_GE = p_And = p_Or = _bin

    def p_Not(self, e):
        return f"!{self.show(e.a)}"

    def p_Select(self, e):
        return f"select({self.show(e.condition)}, {self.show(e.true_value)}, {self.show(e.false_value)})"

    def p_Load(self, e):
        pred = "" if e.predicate is None else f" if {self.show(e.predicate)}"
        return f"{e.name}[{self.show(e.index)}{pred}]"

    def p_Ramp(self, e):
        return f"ramp({self.show(e.base)}, {self.show(e.stride)}, {e.lanes})"

    def p_Broadcast(self, e):
        return f"x{e.lanes}({self.show(e.value)})"

    def p_Call(self, e):
        args = ", ".join(self.show(a) for a in e.args)
        name = e.name if e.value_index == 0 or e.call_type != ir.HALIDE else f"{e.name}.{e.value_index}"
        return f"{name}({args})"

    def p_Let(self, e):
        return f"(let {e.name} = {self.show(e.value)} in {self.show(e.body)})"


def stmt_to_string(s: ir.Stmt) -> str:
    lines: list[str] = []
    _print_stmt(s, 0, lines)
    return "\n".join(lines) + "\n"


def _print_stmt(s, depth: int, out: list[str]) -> None:
    """Iterative over Block and LetStmt chains, so deep pipelines do not recurse deeply."""
    ex = expr_to_string
    pad = "  " * depth
    if isinstance(s, ir.Block):
        for sub in s.stmts:
            _print_stmt(sub, depth, out)
    elif isinstance(s, ir.LetStmt):
        while isinstance(s, ir.LetStmt):
            out.append(f"{pad}let {s.name} = {ex(s.value)}")
            s = s.body
        _print_stmt(s, depth, out)
    elif isinstance(s, ir.AssertStmt):
        args = ", ".join(ex(a) for a in s.args)
        out.append(f"{pad}assert({ex(s.condition)}, {s.message!r}{', ' + args if args else ''})")
    elif isinstance(s, ir.ProducerConsumer):
        out.append(f"{pad}{'produce' if s.is_producer else 'consume'} {s.name} {{")
        _print_stmt(s.body, depth + 1, out)
        out.append(pad + "}")
    elif isinstance(s, ir.For):
        out.append(f"{pad}for<{s.for_type}> ({s.name}, {ex(s.min)}, {ex(s.extent)}) {{")
        _print_stmt(s.body, depth + 1, out)
        out.append(pad + "}")
    elif isinstance(s, ir.Store):
        pred = "" if s.predicate is None else f" if {ex(s.predicate)}"
        out.append(f"{pad}{s.name}[{ex(s.index)}] = {ex(s.value)}{pred}")
    elif isinstance(s, ir.Provide):
        vals = ", ".join(ex(v) for v in s.values)
        if len(s.values) > 1:
            vals = "{" + vals + "}"
        out.append(f"{pad}{s.name}({', '.join(ex(a) for a in s.args)}) = {vals}")
    elif isinstance(s, ir.Atomic):
        out.append(f"{pad}atomic ({s.old}) {{")
        _print_stmt(s.body, depth + 1, out)
        out.append(pad + "}")
    elif isinstance(s, ir.Allocate):
        ext = " * ".join(ex(e) for e in s.extents) or "1"
        where = "" if s.memory_type == "Auto" else f" in {s.memory_type}"
        out.append(f"{pad}allocate {s.name}[{s.type} * {ext}]{where}")
        _print_stmt(s.body, depth, out)
    elif isinstance(s, ir.Realize):
        b = ", ".join(f"[{ex(m)}, {ex(e)}]" for m, e in s.bounds)
        folds = "".join(f" fold dim {d} by {k}" for d, k in enumerate(s.folds) if k)
        out.append(f"{pad}realize {s.name}({b}){folds} {{")
        _print_stmt(s.body, depth + 1, out)
        out.append(pad + "}")
    elif isinstance(s, ir.IfThenElse):
        out.append(f"{pad}if ({ex(s.condition)}) {{")
        _print_stmt(s.then_case, depth + 1, out)
        if s.else_case is not None:
            out.append(pad + "} else {")
            _print_stmt(s.else_case, depth + 1, out)
        out.append(pad + "}")
    elif isinstance(s, ir.Evaluate):
        out.append(f"{pad}{ex(s.value)}")
    elif isinstance(s, ir.Free):
        out.append(f"{pad}free {s.name}")
    else:
        out.append(f"{pad}<{type(s).__name__}>")
