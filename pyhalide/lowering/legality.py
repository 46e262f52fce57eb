"""Questions schedules ask about an update definition: may its loops be reordered or run in parallel?

Each takes the Func and the stage, and the definition asked about where it is a specialization's
own (rfactored on its own); by default the stage's scheduled definition."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from .. import ir
from ..cse import inline_lets
from ..ir_mutator import IRMutator, IRVisitor, free_variables


class _SelfCalls(IRVisitor):
    visit_once = True

    def __init__(self, func):
        super().__init__()
        self.func = func
        self.calls: list[ir.Call] = []

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.func is self.func:
            self.calls.append(c)
        self.visit_children(c)


def self_calls(func, exprs) -> list[ir.Call]:
    v = _SelfCalls(func)
    for e in exprs:
        v.visit(e)
    return v.calls


def _definition_exprs(d):
    return [*d.args, *d.values, *([d.predicate] if d.predicate is not None else [])]


def update_is_associative(func, stage: int, definition=None) -> bool:
    """The update is an associative and commutative reduction (see prove_associativity): its RVar
    loops may run in any order, and rfactor may keep any of them."""
    op = prove_associativity(func, stage, definition)
    return op is not None and op.commutative


def writes_what_no_iteration_changes(func, stage: int, definition=None) -> bool:
    """Neither the update's sites nor its values read f, and its values use no RVar (`f(g(r)) = 4`):
    iterations may then run in any order, as in Halide."""
    d = func.scheduled_definitions()[stage] if definition is None else definition
    rvars = {rv.name for rv in d.rvars}
    return not self_calls(func, [*d.args, *d.values]) and not any(rvars & free_variables(v) for v in d.values)


def pure_var_crossing_is_safe(func, stage: int, var: str, definition=None) -> bool:
    """Every read of f by the update uses `var` itself in var's position."""
    d = func.scheduled_definitions()[stage] if definition is None else definition
    pos = func._pure_args.index(var)
    return all(isinstance(c.args[pos], ir.Variable) and c.args[pos].name == var
               for c in self_calls(func, _definition_exprs(d)))


def rvar_loop_is_race_free(func, stage: int, rvar: str, definition=None) -> bool:
    """Distinct values of rvar write distinct elements (some left-hand argument is rvar itself) and
    each read of f by the update is of the element it writes, or of one no iteration writes: in
    one of rvar's positions, a coordinate outside rvar's range (a scan's `f(r) += f(-1)`)."""
    d = func.scheduled_definitions()[stage] if definition is None else definition
    positions = [k for k, a in enumerate(d.args) if isinstance(a, ir.Variable) and a.name == rvar]
    rv = next((v for v in d.rvars if v.name == rvar), None)
    if bool(positions) and all(c.args == d.args or any(_outside_range(c.args[k], rv) for k in positions)
                               for c in self_calls(func, _definition_exprs(d))):
        return True
    return _no_iteration_meets_another(func, d, rvar)


def _no_iteration_meets_another(func, d, rvar: str) -> bool:
    """Halide's test (ParallelRVar): two iterations with different values of rvar, every other
    variable free, never store to one element, and neither reads what the other stores. Each
    coordinate is an affine form; two sites cannot meet where, in some dimension, their
    difference cannot be zero (its range excludes zero, or the gcd of its coefficients does not
    divide its constant: `f(2r + 1)` never meets `f(2r')`) or is zero only where the two values
    of rvar are equal (`f(2r + 1)` and `f(2r' + 1)`)."""
    from ..simplify import simplify

    stores = [_affine(a) for a in d.args]
    if any(form is None for form in stores):
        return False
    other = [({(name, _OTHER if whose == _THIS else whose): k for (name, whose), k in terms.items()}, c)
             for terms, c in stores]
    ranges = {}
    for rv in d.rvars:
        lo, ext = ir.const_value(simplify(rv.min)), ir.const_value(simplify(rv.extent))
        if lo is not None and ext is not None:
            ranges[rv.name] = (lo, lo + ext - 1)
    sites = [stores] + [[_affine(a) for a in c.args] for c in self_calls(func, _definition_exprs(d))]
    for site in sites:
        if any(form is None for form in site):
            return False
        if not any(_never_equal(mine, theirs, rvar, ranges) for mine, theirs in zip(site, other)):
            return False
    return True


def _never_equal(mine, theirs, rvar: str, ranges: dict) -> bool:
    """Whether coordinate `mine` (this iteration's variables) never equals `theirs` (the other's)
    while the two values of rvar differ."""
    terms = dict(mine[0])
    for key, k in theirs[0].items():
        terms[key] = terms.get(key, 0) - k
    terms = {key: k for key, k in terms.items() if k}
    constant = mine[1] - theirs[1]
    if not terms:
        return constant != 0
    if set(terms) == {(rvar, _THIS), (rvar, _OTHER)} and terms[(rvar, _THIS)] == -terms[(rvar, _OTHER)] \
            and constant == 0:
        return True  # equal only where the two values of rvar are
    gcd = 0
    for k in terms.values():
        gcd = math.gcd(gcd, abs(k))
    if constant % gcd:
        return True
    lo = hi = constant
    for (name, _), k in terms.items():
        if name not in ranges:
            return False
        a, b = (k * v for v in ranges[name])
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo > 0 or hi < 0


_THIS, _OTHER, _SHARED = "this", "other", "shared"  # whose variable: a Param is both iterations'


def _affine(e: ir.Expr):
    """e as ({(variable, whose): coefficient}, constant) over integer constants, or None."""
    from ..param import Param

    if isinstance(e, ir.IntImm):
        return {}, e.value
    if isinstance(e, ir.Variable) and e.type.is_int() and e.type.bits == 32:
        return {(e.name, _SHARED if isinstance(e.ref, Param) else _THIS): 1}, 0
    if isinstance(e, ir.Add | ir.Sub):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, ir.Add) else -1
        terms = dict(a[0])
        for key, k in b[0].items():
            terms[key] = terms.get(key, 0) + sign * k
        return {key: k for key, k in terms.items() if k}, a[1] + sign * b[1]  # (p - p: no term)
    if isinstance(e, ir.Mul):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None or (a[0] and b[0]):
            return None
        (terms, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return ({key: v * k for key, v in terms.items()} if k else {}), c * k
    return None


def _outside_range(e: ir.Expr, rv) -> bool:
    """Whether e is provably never in the range of the reduction variable rv."""
    from ..ir_mutator import free_variables
    from ..simplify import simplify

    if rv is None or rv.name in free_variables(e):
        return False
    last = ir.Sub(ir.Add(rv.min, rv.extent), ir.make_const(rv.min.type, 1))
    return ir.is_const(simplify(ir.LT(e, rv.min)), 1) or ir.is_const(simplify(ir.GT(e, last)), 1)


# ---------------------------------------------------------------- associativity
@dataclass(frozen=True)
class AssociativeOp:
    """An update `f = op(f, y)` proven associative: `combine` is op, element by element, over the
    placeholders `old(k)` (f's element k) and `new(k)` (y's); `terms` is y, the values the update
    folds into f; `identities` is op's identity. rfactor folds partial results with `combine`.
    Where op is not `commutative` (an argmin keeps the first or the last of equal minima), only
    the order in which the update visits its RVars keeps the result exact: Halide reorders them
    all the same, and so may a user's schedule, but a tuner or a fuzz that must not change a
    result does not."""

    combine: tuple[ir.Expr, ...]
    terms: tuple[ir.Expr, ...]
    identities: tuple[ir.Expr, ...]
    commutative: bool

    def apply(self, old, new) -> tuple[ir.Expr, ...]:
        """op(old, new): each a sequence of one Expr per element."""
        from ..ir_mutator import substitute

        names = {}
        for k, (o, n) in enumerate(zip(old, new)):
            names[_OLD + str(k)] = o
            names[_NEW + str(k)] = n
        return tuple(substitute(names, c) for c in self.combine)


_OLD, _NEW = "old$", "new$"  # placeholder names no user Var can have


def old(k: int, t) -> ir.Variable:
    return ir.Variable(_OLD + str(k), t)


def new(k: int, t) -> ir.Variable:
    return ir.Variable(_NEW + str(k), t)


def prove_associativity(func, stage: int, definition=None) -> AssociativeOp | None:
    """The operator of an update that is an associative reduction, or None.

    Recognised, for each element of f's value (a Tuple's elements may mix them):
    - `f op e` or `e op f` with op one of + * min max && || (commutative), also regrouped:
      `(f + a) + 3`, `f - a`, and `max(f + a, f + b)` as f + max(a, b);
    - the element left as it is (`f = f`);
    - min or max written as a select (`select(e < f, e, f)`), a float max or min that keeps a
      NaN (`select(f > e || is_nan(f), f, e)`), and an unsigned saturating add
      (`select(f > t.max() - e, t.max(), f + e)`, or hl.saturating_add);
    - an argmin or argmax: an element `select(c, f[j], e_j)` (or its mirror) beside a min or max
      element k, c comparing f[k] with that element's e: which element wins a tie makes it
      associative but not commutative;
    - a complex multiply over two elements: `(f0*e0 - f1*e1, f1*e0 + f0*e1)`.
    Neither the e's nor the update's predicate may read f other than through these forms."""
    d = func.scheduled_definitions()[stage] if definition is None else definition
    if d.predicate is not None and self_calls(func, [d.predicate]):
        return None
    types = func.types()
    values = [_OldPlaceholders(func, d.args).mutate(inline_lets(v)) for v in d.values]
    if any(self_calls(func, [v]) for v in values):
        return None  # f read elsewhere than at the element it updates
    uses = [{k for k in range(len(types)) if _OLD + str(k) in free_variables(v)} for v in values]
    combine: list = [None] * len(values)
    terms: list = [None] * len(values)
    ids: list = [None] * len(values)
    extremum: dict[int, str] = {}  # element -> "min" or "max", for the argmin forms
    commutative = True
    for k, v in enumerate(values):
        if uses[k] == {k}:
            found = _single(v, k, types[k])
            if found is None:
                return None
            combine[k], terms[k], ids[k], kind = found
            if kind:
                extremum[k] = kind
    if len(values) == 2 and uses == [{0, 1}, {0, 1}]:
        found = _complex_multiply(values, types)
        if found is None:
            return None
        combine, terms, ids = found
    for j, v in enumerate(values):
        if combine[j] is not None:
            continue
        keys = uses[j] - {j}
        if j not in uses[j] or len(keys) != 1 or next(iter(keys)) not in extremum:
            return None
        key = next(iter(keys))
        found = _chosen_with(v, j, types[j], key, types[key], terms[key], extremum[key])
        if found is None:
            return None
        combine[j], terms[j], ids[j] = found
        commutative = False
    return AssociativeOp(tuple(combine), tuple(terms), tuple(ids), commutative)


class _OldPlaceholders(IRMutator):
    """f's reads of the element it updates, as the placeholders old(k)."""

    def __init__(self, func, args):
        super().__init__()
        self.func, self.args = func, args

    def visit_Call(self, c):
        if c.call_type == ir.HALIDE and c.func is self.func and c.args == self.args:
            return old(c.value_index, c.type)
        return self.default(c)


class _Swap(IRMutator):
    """Replace each subexpression equal to a key of `pieces` (outermost first)."""

    def __init__(self, pieces: dict):
        super().__init__()
        self.pieces = pieces

    def mutate(self, node):
        hit = self.pieces.get(node) if isinstance(node, ir.Expr) else None
        return hit if hit is not None else super().mutate(node)


def _reads_old(e: ir.Expr) -> bool:
    return any(n.startswith(_OLD) for n in free_variables(e))


def _ordered(c: ir.Expr):
    """A comparison as (smaller, larger, strict), or None."""
    if isinstance(c, ir.LT | ir.LE):
        return c.a, c.b, isinstance(c, ir.LT)
    if isinstance(c, ir.GT | ir.GE):
        return c.b, c.a, isinstance(c, ir.GT)
    return None


_FOLDS = (ir.Add, ir.Mul, ir.Min, ir.Max, ir.And, ir.Or)


def _single(v: ir.Expr, k: int, t):
    """(combine, term, identity, "min"/"max"/None) of an element that reads only itself."""
    x = old(k, t)
    if v == x:  # left as it is (`f(r) = f(r)`, or a Tuple element no iteration changes)
        return x, ir.make_const(t, 0), ir.make_const(t, 0), None
    if isinstance(v, _FOLDS) and (v.a == x) != (v.b == x):
        term = v.b if v.a == x else v.a
        if not _reads_old(term):
            kind = {ir.Min: "min", ir.Max: "max"}.get(type(v))
            return _Swap({term: new(k, t)}).mutate(v), term, _identity(type(v), t), kind
    found = _chain(v, x) or _shifted_extremum(v, x)
    if found is not None:
        op, term = found
        kind = {ir.Min: "min", ir.Max: "max"}.get(op)
        return op(x, new(k, t)), term, _identity(op, t), kind
    term = _saturating_add_call(v, x, t)
    if term is not None:
        return _saturating_add(x, new(k, t)), term, ir.make_const(t, 0), None
    if not isinstance(v, ir.Select):
        return None
    picked = _select_extremum(v, x)
    if picked is not None:
        kind, term = picked
        return _Swap({term: new(k, t)}).mutate(v), term, _identity(ir.Min if kind == "min" else ir.Max, t), kind
    picked = _nan_propagating_extremum(v, x)
    if picked is not None:  # (not a key an argmin's other elements may follow)
        kind, term = picked
        return _Swap({term: new(k, t)}).mutate(v), term, _identity(ir.Min if kind == "min" else ir.Max, t), None
    term = _saturating_add_select(v, x, t)
    if term is not None:
        y, top = new(k, t), ir.make_const(t, t.max_value())
        return ir.Select(ir.GT(x, ir.Sub(top, y)), top, ir.Add(x, y)), term, ir.make_const(t, 0), None
    return None


def _chain(v: ir.Expr, x: ir.Expr):
    """(op, e) where v is x op e regrouped: `(f + a) + 3` is f + (a + 3), and a subtraction from
    a sum counts as adding its negation (`f + a - 3`); x one of the operands of a chain of one of
    the folds, read nowhere else. None otherwise."""
    if not isinstance(v, _FOLDS + (ir.Sub,)):
        return None
    op = ir.Add if isinstance(v, ir.Sub) else type(v)
    leaves: list[tuple[bool, ir.Expr]] = []  # (negated, operand)

    def collect(e, negated):
        if type(e) is op:
            collect(e.a, negated)
            collect(e.b, negated)
        elif op is ir.Add and isinstance(e, ir.Sub):
            collect(e.a, negated)
            collect(e.b, not negated)
        else:
            leaves.append((negated, e))

    collect(v, False)
    others = [leaf for leaf in leaves if leaf != (False, x)]
    if len(others) != len(leaves) - 1 or any(_reads_old(e) for _, e in others):
        return None
    term = None
    for negated, e in others:
        if negated:
            term = ir.Sub(ir.make_const(e.type, 0) if term is None else term, e)
        else:
            term = e if term is None else op(term, e)
    return op, term


def _shifted_extremum(v: ir.Expr, x: ir.Expr):
    """(Add, max(a, b)) for `max(x + a, x + b)` (x alone is x + 0), min likewise: equal where sums
    do not wrap (floats round monotonically; 32- and 64-bit signed integers are assumed not to
    overflow, as Halide assumes). None otherwise."""
    t = v.type
    if not isinstance(v, ir.Min | ir.Max) or not (t.is_float() or (t.is_int() and t.bits >= 32)):
        return None
    terms = []
    for side in (v.a, v.b):
        if side == x:
            terms.append(ir.make_const(t, 0))
            continue
        found = _chain(side, x)
        if found is None or found[0] is not ir.Add:
            return None
        terms.append(found[1])
    return ir.Add, type(v)(*terms)


def _select_extremum(v: ir.Select, x: ir.Expr):
    """select(a < b, a, b) (min) or select(a < b, b, a) (max) of x and a term: (kind, term)."""
    cmp = _ordered(v.condition)
    if cmp is None:
        return None
    small, large, _ = cmp
    if {small, large} != {v.true_value, v.false_value} or x not in (small, large) or small == large:
        return None
    term = large if small == x else small
    if _reads_old(term):
        return None
    return ("min" if v.true_value == small else "max"), term


def _is_nan_call(e: ir.Expr) -> bool:
    return isinstance(e, ir.Call) and e.call_type == ir.INTRINSIC and e.name == "is_nan"


def _nan_propagating_extremum(v: ir.Select, x: ir.Expr):
    """(kind, e) of a float max or min that keeps a NaN once it has one: `select(x > e ||
    is_nan(x), x, e)` (any comparison picking x, is_nan on either side; an e that is NaN is
    picked by the comparison failing), or None."""
    c = v.condition
    if not (x.type.is_float() and isinstance(c, ir.Or) and v.true_value == x):
        return None
    for nan_side, comparison in ((c.a, c.b), (c.b, c.a)):
        if _is_nan_call(nan_side) and nan_side.args[0] == x:
            return _select_extremum(ir.Select(comparison, x, v.false_value), x)
    return None


def _saturating_add_select(v: ir.Select, x: ir.Expr, t):
    """The term e of an unsigned `select(x > t.max() - e, t.max(), x + e)` (or the mirrored
    comparisons, strict or not: where x + e == t.max() both arms agree), or None."""
    if not t.is_uint() or t.is_bool():
        return None
    top = ir.make_const(t, t.max_value())
    cmp = _ordered(v.condition)
    if cmp is None:
        return None
    small, large, _ = cmp
    if small == x:  # x < max - e: no overflow in the true arm
        headroom, sum_, capped = large, v.true_value, v.false_value
    elif large == x:
        headroom, sum_, capped = small, v.false_value, v.true_value
    else:
        return None
    if not (isinstance(headroom, ir.Sub) and headroom.a == top and capped == top and isinstance(sum_, ir.Add)):
        return None
    term = headroom.b
    if {sum_.a, sum_.b} != {x, term} or _reads_old(term):
        return None
    return term


def _saturating_add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    from ..expr import wrap
    from ..integer_ops import saturating_add

    return saturating_add(wrap(a), wrap(b)).ir()


def _saturating_add_call(v: ir.Expr, x: ir.Expr, t):
    """The term e of an unsigned hl.saturating_add(x, e) or (e, x), or None. (Signed saturating
    adds are not associative: 100 + 100 saturates at 127 before a -100 comes.)"""
    if not t.is_uint() or t.is_bool() or t.bits > 32 or not isinstance(v, ir.Cast):
        return None
    y = new(0, t)
    for pattern in (_saturating_add(x, y), _saturating_add(y, x)):
        binds: dict[str, ir.Expr] = {}
        if _matches(pattern, v, binds) and not _reads_old(binds[y.name]):
            return binds[y.name]
    return None


def _matches(pattern, e, binds: dict) -> bool:
    """Whether e is pattern with each new(k) placeholder standing for one expression (bound in
    binds by the placeholder's name)."""
    if isinstance(pattern, ir.Variable) and pattern.name.startswith(_NEW):
        return pattern.type == e.type and binds.setdefault(pattern.name, e) == e
    if type(pattern) is not type(e):
        return False
    children = type(pattern)._children
    for fld in fields(pattern):
        a, b = getattr(pattern, fld.name), getattr(e, fld.name)
        if fld.name not in children:
            if a != b:
                return False
        elif isinstance(a, tuple):
            if len(a) != len(b) or not all(_matches(p, q, binds) for p, q in zip(a, b)):
                return False
        elif not _matches(a, b, binds):
            return False
    return True


def _chosen_with(v: ir.Expr, j: int, t, key: int, key_type, key_term: ir.Expr, kind: str):
    """(combine, term, identity) of an argmin/argmax element: `select(c, old j, e)` or
    `select(c, e, old j)`, c comparing old(key) with key_term so that e is taken where the new
    value is the better (or, for a tie, as c says)."""
    if not isinstance(v, ir.Select):
        return None
    cmp = _ordered(v.condition)
    x_key = old(key, key_type)
    if cmp is None or {cmp[0], cmp[1]} != {x_key, key_term}:
        return None
    x = old(j, t)
    if v.true_value == x and v.false_value != x:
        term, takes_new_when_true = v.false_value, False
    elif v.false_value == x and v.true_value != x:
        term, takes_new_when_true = v.true_value, True
    else:
        return None
    if _reads_old(term):
        return None
    new_is_smaller = cmp[0] == key_term  # where the condition holds
    if takes_new_when_true != (new_is_smaller == (kind == "min")):
        return None  # the element follows the other extremum than the key keeps
    combine = _Swap({key_term: new(key, key_type)}).mutate(v.condition)
    arms = (x, new(j, t)) if v.true_value == x else (new(j, t), x)
    return ir.Select(combine, *arms), term, ir.make_const(t, 0)


def _complex_multiply(values, types):
    """(combine, terms, identities) of `(x0*e0 - x1*e1, x1*e0 + x0*e1)`, products in any order."""
    if types[0] != types[1]:
        return None
    x0, x1 = old(0, types[0]), old(1, types[1])
    re, im = values
    if not (isinstance(re, ir.Sub) and isinstance(im, ir.Add)):
        return None

    def factor(product, x):
        if isinstance(product, ir.Mul) and (product.a == x) != (product.b == x):
            other = product.b if product.a == x else product.a
            return None if _reads_old(other) else other
        return None

    e0, e1 = factor(re.a, x0), factor(re.b, x1)
    im_terms = [(factor(im.a, x1), factor(im.b, x0)), (factor(im.b, x1), factor(im.a, x0))]
    if e0 is None or e1 is None or (e0, e1) not in im_terms:
        return None
    y0, y1 = new(0, types[0]), new(1, types[1])
    combine = (ir.Sub(ir.Mul(x0, y0), ir.Mul(x1, y1)), ir.Add(ir.Mul(x1, y0), ir.Mul(x0, y1)))
    return list(combine), [e0, e1], [ir.make_const(types[0], 1), ir.make_const(types[1], 0)]


def _identity(op, t) -> ir.Expr:
    if op is ir.Add or op is ir.Or:
        return ir.make_const(t, 0)
    if op is ir.Mul or op is ir.And:
        return ir.make_const(t, 1)
    if op is ir.Min:
        return ir.make_const(t, float("inf") if t.is_float() else t.max_value())
    return ir.make_const(t, float("-inf") if t.is_float() else t.min_value())
