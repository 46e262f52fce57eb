"""Loop versioning on residues: a vectorized `x % k` or `x / k` (k of 2 to 4) whose lanes' phase
is not known when compiling is computed, in each of k copies of its loop, with the phase known.

A Bayer mosaic's `select(x % 2 == 0, ...)` and an upsampling's `f[x / 2]` vectorize into
`ramp(b, 1, n) % k` and `ramp(b, 1, n) / k`. When b's residue mod k is a constant (b = x_o * 32
over bounds fixed by `bound`), the first is a constant pattern and the second a dense load and a
fixed shuffle. When b holds a buffer's min or a producer's computed min, as it does in any
schedule that does not fix the bounds (every autoscheduled one), each vector pays for a pattern
worked out at run time and a shuffle picked at run time (camera_pipe's demosaic: 1.46x slower).

Where b's residue is the same in every iteration of the innermost loop around it (its terms
either multiples of k or invariant in the loop), the loop is versioned: one copy per residue r,
chosen before the loop, in which these exact rewrites hold:
    ramp(b, 1, n) % k  ->  ramp(r, 1, n) % k                        (a constant)
    ramp(b, 1, n) / k  ->  ramp(r, 1, n) / k + broadcast((b - r) / k)
The second is what lower_arithmetic turns into a dense load and a shuffle fixed by r. A base
that is a min or max of terms with different residues (ShiftInwards' last vector,
`min(x_o * 32 + x.min, x.max - 31)`) has a version per residue where all its alternatives agree,
and the loop as it was otherwise.

Assumes: vectorized and simplified; index arithmetic in int32 or int64 does not overflow (as
Halide assumes), so residues of sums and products are those of their terms.
Guarantees: each version computes what the loop did; only serial and parallel loops are versioned
(GPU kernels hold no vectors); a loop's body is copied k times only if it has at most MAX_BODY
nodes, k + 1 times only if at most MAX_BODY_WITH_FALLBACK.
"""

from __future__ import annotations

from .. import ir
from ..ir_mutator import IRMutator, IRVisitor, children, free_variables
from ..ir_printer import expr_to_string
from ..types import Int

MAX_ALTERNATIVES = 3  # residue forms a base may have (the alternatives of its mins and maxes)
MAX_BODY = 20000  # IR nodes a loop body may have to be copied k times
# ... and k + 1 times (versions and the loop as it was): local_laplacian's upsamplings (1100
# nodes, float work around the loads) ran no faster that way and compiled 30% longer.
MAX_BODY_WITH_FALLBACK = 800
_INDEX_TYPES = (Int(32), Int(64))


class _Form:
    """An integer's residue mod k as a linear form: sum of coefficient * term, plus a constant,
    coefficients and constant reduced mod k (terms whose coefficient is 0 mod k drop out)."""

    __slots__ = ("terms", "const", "key")

    def __init__(self, terms: dict, const: int, k: int):
        self.terms = {t: (e, c % k) for t, (e, c) in terms.items() if c % k}
        self.const = const % k
        self.key = (frozenset((t, c) for t, (_, c) in self.terms.items()), self.const)

    def plus(self, other: _Form, sign: int, k: int) -> _Form:
        terms = dict(self.terms)
        for t, (e, c) in other.terms.items():
            terms[t] = (e, terms.get(t, (e, 0))[1] + sign * c)
        return _Form(terms, self.const + sign * other.const, k)

    def times(self, m: int, k: int) -> _Form:
        return _Form({t: (e, c * m) for t, (e, c) in self.terms.items()}, self.const * m, k)

    def value(self, t) -> ir.Expr:
        """The form as an expression of type t (its residue mod k is the base's)."""
        out = ir.make_const(t, self.const) if self.const else None
        for e, c in sorted(self.terms.values(), key=lambda ec: expr_to_string(ec[0])):
            term = _cast(e, t) if c == 1 else ir.Mul(_cast(e, t), ir.make_const(t, c))
            out = term if out is None else ir.Add(out, term)
        return out


def _cast(e: ir.Expr, t) -> ir.Expr:
    return e if e.type == t else ir.Cast(t, e)


class _Residues:
    """The residue forms of scalar integer expressions inside one loop: its variable and the
    names bound inside it are `inner` (a term in them must drop out); lets inside it are seen
    through."""

    def __init__(self, k: int, inner: set, lets: dict):
        self.k, self.inner, self.lets = k, inner, lets
        self._memo: dict[int, tuple] = {}

    def forms(self, e: ir.Expr, depth: int = 0) -> list[_Form] | None:
        hit = self._memo.get(id(e))
        if hit is None:
            hit = self._memo[id(e)] = (e, self._forms(e, depth))
        return hit[1]

    def _forms(self, e: ir.Expr, depth: int) -> list[_Form] | None:
        k = self.k
        if depth > 40 or e.type not in _INDEX_TYPES:
            return None
        if isinstance(e, ir.IntImm):
            return [_Form({}, e.value, k)]
        if isinstance(e, ir.Variable):
            if e.name in self.lets:
                return self.forms(self.lets[e.name], depth + 1)
            return [_Form({e.name: (e, 1)}, 0, k)]  # a name bound inside must drop out (loop_invariant)
        if isinstance(e, ir.Add | ir.Sub):
            a, b = self.forms(e.a, depth + 1), self.forms(e.b, depth + 1)
            if a is None or b is None:
                return None
            sign = 1 if isinstance(e, ir.Add) else -1
            return _distinct([fa.plus(fb, sign, k) for fa in a for fb in b])
        if isinstance(e, ir.Mul):
            for x, y in ((e.a, e.b), (e.b, e.a)):
                m = ir.const_int(y)
                if m is not None:
                    fx = self.forms(x, depth + 1)
                    return None if fx is None else _distinct([f.times(m, k) for f in fx])
        if isinstance(e, ir.Min | ir.Max):
            a, b = self.forms(e.a, depth + 1), self.forms(e.b, depth + 1)
            return None if a is None or b is None else _distinct(a + b)
        if isinstance(e, ir.Select):
            a, b = self.forms(e.true_value, depth + 1), self.forms(e.false_value, depth + 1)
            return None if a is None or b is None else _distinct(a + b)
        # anything else is one opaque term, if it can be evaluated before the loop
        if free_variables(e) & (self.inner | set(self.lets)) or _reads_memory(e):
            return None
        return [_Form({"$" + expr_to_string(e): (e, 1)}, 0, k)]

    def loop_invariant(self, forms: list[_Form] | None) -> list[_Form] | None:
        if forms is None or len(forms) > MAX_ALTERNATIVES:
            return None
        if any(t in self.inner for f in forms for t in f.terms):
            return None
        return forms


def _distinct(forms: list[_Form]) -> list[_Form] | None:
    out = list({f.key: f for f in forms}.values())
    return out if len(out) <= MAX_ALTERNATIVES else None


def _reads_memory(e: ir.Expr) -> bool:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Load | ir.Call):
            return True
        stack.extend(children(n))
    return False


def _candidate(e: ir.Expr) -> int | None:
    """k when e is ramp(b, 1, n) % k, or ramp(b, 1, n) / k with k dividing n, b scalar integer."""
    if not isinstance(e, ir.Div | ir.Mod) or not isinstance(e.a, ir.Ramp) or not isinstance(e.b, ir.Broadcast):
        return None
    k = ir.const_int(e.b.value)
    ramp = e.a
    if k is None or not 2 <= k <= 4 or ir.const_int(ramp.stride) != 1 or ramp.base.type not in _INDEX_TYPES:
        return None
    if isinstance(e, ir.Div) and ramp.lanes % k:
        return None
    if isinstance(ramp.base, ir.IntImm):
        return None  # already known
    return k


class _Scan(IRVisitor):
    """The candidates in a loop's body (not inside loops nested in it), with the lets in scope
    at each and the names bound inside the loop."""

    visit_once = True  # bodies share subtrees (unrolled copies); names are unique, so is scope

    def __init__(self, loop: str):
        super().__init__()
        self.inner = {loop}
        self.lets: dict[str, ir.Expr] = {}
        self.found: list[tuple[ir.Expr, int, dict]] = []  # (candidate, k, lets in scope)

    def visit_For(self, s):
        self.inner.add(s.name)  # its body belongs to its own versioning

    def _bind(self, name, value, body):
        self.visit(value)
        self.inner.add(name)
        self.lets[name] = value
        self.visit(body)
        del self.lets[name]

    def visit_LetStmt(self, s):
        self._bind(s.name, s.value, s.body)

    def visit_Let(self, e):
        self._bind(e.name, e.value, e.body)

    def visit_Div(self, e):
        self._maybe(e)

    def visit_Mod(self, e):
        self._maybe(e)

    def _maybe(self, e):
        k = _candidate(e)
        if k is not None:
            self.found.append((e, k, dict(self.lets)))
        self.visit_children(e)


class _Rewrite(IRMutator):
    """One version of a loop body: the candidates of `residue_of` (id -> their base's residue in
    this version) rewritten; loops nested inside are left as they are (they have their own)."""

    def __init__(self, residue_of: dict[int, int]):
        super().__init__()
        self.residue_of = residue_of
        self._memo: dict[int, tuple] = {}

    def mutate(self, node):
        if node is None:
            return None
        hit = self._memo.get(id(node))
        if hit is None:
            hit = self._memo[id(node)] = (node, super().mutate(node))
        return hit[1]

    def visit_For(self, s):
        return s

    def _rewrite(self, e):
        r = self.residue_of.get(id(e))
        e = self.default(e)
        if r is None:
            return e
        ramp = e.a
        t = ramp.base.type
        phased = ir.Ramp(ir.make_const(t, r), ir.make_const(t, 1), ramp.lanes)
        if isinstance(e, ir.Mod):
            return ir.Mod(phased, e.b)
        whole = ir.Div(ir.Sub(ramp.base, ir.make_const(t, r)), e.b.value)
        return ir.Add(ir.Div(phased, e.b), ir.Broadcast(whole, ramp.lanes))

    def visit_Div(self, e):
        return self._rewrite(e)

    def visit_Mod(self, e):
        return self._rewrite(e)


def _size(node, limit: int) -> int:
    """Nodes in node, counting stops past limit."""
    n, stack = 0, [node]
    while stack and n <= limit:
        x = stack.pop()
        n += 1
        stack.extend(children(x))
    return n


class SpecializeResidues(IRMutator):
    statements_only = True

    def visit_For(self, s):
        body = self.mutate(s.body)
        loop = s if body is s.body else ir.For(s.name, s.min, s.extent, s.for_type, body)
        if s.for_type not in (ir.SERIAL, ir.PARALLEL):
            return loop
        return _version(loop)


def _version(loop: ir.For) -> ir.Stmt:
    scan = _Scan(loop.name)
    scan.visit(loop.body)
    if not scan.found or _size(loop.body, MAX_BODY) > MAX_BODY:
        return loop
    by_k: dict[int, list] = {}
    for e, k, lets in scan.found:
        by_k.setdefault(k, []).append((e, lets))
    k, found = max(by_k.items(), key=lambda kv: len(kv[1]))
    # Each candidate's base: {term set: constant}, one entry per alternative of its mins and
    # maxes; it is known in a version where its alternatives agree.
    bases: list[tuple[ir.Expr, dict]] = []
    rep: dict[frozenset, _Form] = {}  # a form of each term set, to compute the set's residue
    for e, lets in found:
        res = _Residues(k, scan.inner, lets)
        forms = res.loop_invariant(res.forms(e.a.base))
        if forms is None:
            continue
        alts = {}
        for f in forms:
            terms = f.key[0]
            if alts.setdefault(terms, f.const) != f.const:
                break  # two alternatives with the same terms and different residues never agree
            rep.setdefault(terms, _Form(f.terms, 0, k))
        else:
            bases.append((e, alts))
    if not bases:
        return loop
    # The anchor: the term set the versions choose the residue of (the empty set, a known
    # constant, if some base has one); every other set's residue is fixed relative to it by the
    # first base that holds both (its alternatives agree), and bases that disagree are left out.
    count: dict[frozenset, int] = {}
    for _, alts in bases:
        for terms in alts:
            count[terms] = count.get(terms, 0) + 1
    empty = frozenset()
    anchor = empty if empty in count else max(count, key=count.get)
    offset = {anchor: 0}  # term set -> its residue minus the anchor's
    for _, alts in bases:
        if anchor in alts:
            for terms, c in alts.items():
                offset.setdefault(terms, (alts[anchor] - c) % k)
    known: dict[int, int] = {}  # candidate -> its residue when the anchor's is 0
    for e, alts in bases:
        values = {(offset[terms] + c) % k for terms, c in alts.items() if terms in offset}
        if len(values) == 1 and all(terms in offset for terms in alts):
            known[id(e)] = values.pop()
    others = [terms for terms in offset if terms != anchor]
    if not known or len(others) + (anchor != empty) > MAX_ALTERNATIVES:
        return loop
    if others and _size(loop.body, MAX_BODY_WITH_FALLBACK) > MAX_BODY_WITH_FALLBACK:
        return loop
    t = Int(32)
    checked = ([] if anchor == empty else [anchor]) + others
    names = [f"{loop.name}.residue.{j}" for j in range(len(checked))]
    residues = dict(zip(checked, (ir.Variable(n, t) for n in names)))
    choices = [0] if anchor == empty else range(k)
    # where the alternatives' residues disagree (an odd extent under ShiftInwards), or nothing
    # has to be checked at all, the loop as it was / the one version
    out = loop if others else None
    for a in reversed(choices):
        version = _with_body(loop, _Rewrite({i: (a + r) % k for i, r in known.items()}).mutate(loop.body))
        if out is None:
            out = version
            continue
        cond = None
        for terms, v in residues.items():
            c = ir.EQ(v, ir.make_const(t, (a + offset[terms]) % k))
            cond = c if cond is None else ir.And(cond, c)
        out = ir.IfThenElse(cond, version, out)
    for name, terms in reversed(list(zip(names, checked))):
        value = ir.Mod(rep[terms].value(Int(64)), ir.make_const(Int(64), k))
        out = ir.LetStmt(name, ir.Cast(t, value), out)
    return out


def _with_body(loop: ir.For, body: ir.Stmt) -> ir.For:
    return ir.For(loop.name, loop.min, loop.extent, loop.for_type, body)


def specialize_residues(stmt: ir.Stmt) -> ir.Stmt:
    """The Stmt with loops versioned on the residues of their vectorized divisions and moduli."""
    return SpecializeResidues().mutate(stmt)
