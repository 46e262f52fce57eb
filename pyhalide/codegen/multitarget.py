"""The dispatcher of a multi-target library (Halide's compile_multitarget): `NAME(args...)` and
`NAME_argv(args)` call the first sub-pipeline, in the order the targets were given, whose
instruction set features this CPU has and its OS enables; the last target, the baseline, is
taken without a check. The choice is made once (CPUID and XGETBV), kept in a global and reused.

x86 only: the check is what Halide's runtime (halide_can_use_target_features) asks of an x86
CPU, for the LLVM features each target compiles with (aot.x86_llvm_features).
"""

from __future__ import annotations

from llvmlite import ir as ll

from ..errors import HalideError
from . import jit
from .llvm_types import I32, PTR

# LLVM feature -> (CPUID word, bit): words "1.ecx", "1.edx" (leaf 1), "7.ebx", "7.ecx" (leaf 7),
# "7.1.eax" (leaf 7, subleaf 1)
CPUID_BITS = {
    "sse2": ("1.edx", 26), "sse3": ("1.ecx", 0), "ssse3": ("1.ecx", 9), "fma": ("1.ecx", 12),
    "sse4.1": ("1.ecx", 19), "avx": ("1.ecx", 28), "f16c": ("1.ecx", 29),
    "avx2": ("7.ebx", 5), "avx512f": ("7.ebx", 16), "avx512dq": ("7.ebx", 17), "avx512ifma": ("7.ebx", 21),
    "avx512cd": ("7.ebx", 28), "avx512bw": ("7.ebx", 30), "avx512vl": ("7.ebx", 31),
    "avx512vbmi": ("7.ecx", 1), "avx512vnni": ("7.ecx", 11),
    "avxvnni": ("7.1.eax", 4), "avx512bf16": ("7.1.eax", 5),
}
WORDS = ("1.ecx", "1.edx", "7.ebx", "7.ecx", "7.1.eax", "xcr0")
_YMM_STATE, _ZMM_STATE = 0x6, 0xE6  # XCR0: the OS saves SSE+AVX state (and the AVX-512 state)


def requirements(llvm_features: list[str]) -> dict[str, int]:
    """word -> the bits a CPU must have set in it to run code compiled with these features."""
    masks = dict.fromkeys(WORDS, 0)
    for name in llvm_features:
        if name not in CPUID_BITS:
            raise HalideError(f"compile_to_multitarget: pyhalide cannot check at run time for the x86 feature {name}")
        word, bit = CPUID_BITS[name]
        masks[word] |= 1 << bit
        if name.startswith("avx") or name in ("fma", "f16c"):
            masks["xcr0"] |= _ZMM_STATE if name.startswith("avx512") else _YMM_STATE
    return masks


def dispatcher_module(fn_name: str, argument_types: list[ll.Type], choices: list[tuple[str, dict[str, int]]],
                      triple: str) -> ll.Module:
    """The module defining fn_name and fn_name_argv, which call choices[i][0] (and its _argv) for
    the first i whose requirements (see `requirements`) the CPU meets; the last unconditionally."""
    m = ll.Module(fn_name + ".dispatch")
    m.triple = triple
    choice = ll.GlobalVariable(m, I32, f"{fn_name}.choice")
    choice.linkage, choice.initializer = "internal", ll.Constant(I32, -1)
    choose = _choose_function(m, fn_name, [req for _, req in choices[:-1]], len(choices) - 1)
    for suffix, types in (("", argument_types), ("_argv", [PTR])):
        fty = ll.FunctionType(I32, types)
        subs = [ll.Function(m, fty, name + suffix) for name, _ in choices]
        fn = ll.Function(m, fty, fn_name + suffix)
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        known = b.load_atomic(choice, "monotonic", 4)
        with b.if_then(b.icmp_signed("<", known, ll.Constant(I32, 0)), likely=False):
            b.store_atomic(b.call(choose, []), choice, "monotonic", 4)
        index = b.load_atomic(choice, "monotonic", 4)
        last = fn.append_basic_block("baseline")
        switch = b.switch(index, last)
        for i, sub in enumerate(subs):
            block = last if i == len(subs) - 1 else fn.append_basic_block(f"choice{i}")
            if block is not last:
                switch.add_case(ll.Constant(I32, i), block)
            b.position_at_end(block)
            b.ret(b.call(sub, list(fn.args), tail=True))
    return m


def _choose_function(m: ll.Module, fn_name: str, checks: list[dict[str, int]], baseline: int) -> ll.Function:
    """i32 choose(): the index of the first check the CPU passes, else `baseline`."""
    fn = ll.Function(m, ll.FunctionType(I32, []), f"{fn_name}.choose")
    fn.linkage = "internal"
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    regs = ll.LiteralStructType([I32, I32, I32, I32])
    cpuid = ll.InlineAsm(ll.FunctionType(regs, [I32, I32]), "cpuid", "={ax},={bx},={cx},={dx},{ax},{cx}",
                         side_effect=True)
    words = {w: b.alloca(I32, name=w) for w in WORDS}
    for slot in words.values():
        b.store(ll.Constant(I32, 0), slot)

    def leaf(n: int, sub: int = 0):
        return b.call(cpuid, [ll.Constant(I32, n), ll.Constant(I32, sub)])

    top = b.extract_value(leaf(0), 0)
    leaf1 = leaf(1)
    b.store(b.extract_value(leaf1, 2), words["1.ecx"])
    b.store(b.extract_value(leaf1, 3), words["1.edx"])
    with b.if_then(b.icmp_unsigned(">=", top, ll.Constant(I32, 7))):
        leaf7 = leaf(7)
        b.store(b.extract_value(leaf7, 1), words["7.ebx"])
        b.store(b.extract_value(leaf7, 2), words["7.ecx"])
        with b.if_then(b.icmp_unsigned(">=", b.extract_value(leaf7, 0), ll.Constant(I32, 1))):
            b.store(b.extract_value(leaf(7, 1), 0), words["7.1.eax"])
    osxsave = b.and_(b.extract_value(leaf1, 2), ll.Constant(I32, 1 << 27))
    with b.if_then(b.icmp_unsigned("!=", osxsave, ll.Constant(I32, 0))):
        xgetbv = ll.InlineAsm(ll.FunctionType(ll.LiteralStructType([I32, I32]), [I32]), "xgetbv",
                              "={ax},={dx},{cx}", side_effect=True)
        b.store(b.extract_value(b.call(xgetbv, [ll.Constant(I32, 0)]), 0), words["xcr0"])
    for i, masks in enumerate(checks):
        ok = ll.Constant(ll.IntType(1), 1)
        for word, mask in masks.items():
            if mask:
                have = b.and_(b.load(words[word]), ll.Constant(I32, mask))
                ok = b.and_(ok, b.icmp_unsigned("==", have, ll.Constant(I32, mask)))
        with b.if_then(ok):
            b.ret(ll.Constant(I32, i))
    b.ret(ll.Constant(I32, baseline))
    return fn


def dispatcher_object(module: ll.Module, cpu: str, features: str) -> bytes:
    """The dispatcher compiled for the baseline's CPU. Its CPUID and XGETBV are inline assembly,
    which only the host's assembler parses (llvmlite has no other): an x86 host."""
    import llvmlite.binding as llvm

    if not jit.host_target().triple.startswith(("x86_64", "i386", "i686")):
        raise HalideError("compile_to_multitarget: the dispatcher's CPU checks need LLVM's x86 assembler, which "
                          "llvmlite has on x86 hosts only")
    with jit.llvm_lock():
        jit.initialize_all_targets()
        llvm.initialize_native_asmparser()
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        tm = llvm.Target.from_triple(module.triple).create_target_machine(
            cpu=cpu, features=features, opt=2, reloc="pic", codemodel="default")
        jit.run_optimizations(mod, tm)
        return tm.emit_object(mod)

