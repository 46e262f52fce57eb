"""pyhalide: a Halide-style scheduling language embedded in Python, JIT-compiled through LLVM.

`import pyhalide as hl` mirrors the Halide 21 Python bindings where a feature exists.
"""

import sys as _sys

from . import boundary_conditions as BoundaryConditions
from .ahead_of_time import OutputFileType
from .autodiff import Derivative, propagate_adjoints
from .autoschedulers import AutoschedulerParams, AutoSchedulerResults, load_plugin
from .buffer import Buffer
from .errors import BufferIndexError, CompileError, HalideError, InternalError, RuntimeCheckError
from .expr import Expr
from .extern import ExternFuncArgument, NameMangling
from .fast_math import fast_cos, fast_exp, fast_log, fast_pow, fast_sin
from .func import Func, FuncRef, FuncTupleElementRef, Stage, Tuple, lambda_func
from .generator import (
    Generator,
    GeneratorContext,
    GeneratorParam,
    InputBuffer,
    InputScalar,
    OutputBuffer,
    OutputScalar,
    active_generator_context,
    alias,
    create_callable_from_generator,
    create_generator,
    generator,
    main,
)
from .inline_reductions import argmax, argmin, maximum, minimum, product, sum
from .integer_ops import (
    concat_bits,
    div_round_to_zero,
    evaluate,
    evaluate_may_gpu,
    extract_bits,
    fract,
    funcs,
    halving_add,
    halving_sub,
    likely_if_innermost,
    memoize_tag,
    mod_round_to_zero,
    mul_shift_right,
    rounding_halving_add,
    rounding_mul_shift_right,
    rounding_shift_left,
    rounding_shift_right,
    saturating_add,
    saturating_sub,
    strict_float,
    unsafe_promise_clamped,
    vars,
    widen_right_add,
    widen_right_mul,
    widen_right_sub,
    widening_add,
    widening_mul,
    widening_shift_left,
    widening_shift_right,
    widening_sub,
)
from .operators import (
    abs,
    absd,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cast,
    ceil,
    clamp,
    cos,
    cosh,
    count_leading_zeros,
    count_trailing_zeros,
    erf,
    exp,
    f32,
    f64,
    fast_inverse,
    fast_inverse_sqrt,
    floor,
    hypot,
    i8,
    i8_sat,
    i16,
    i16_sat,
    i32,
    i32_sat,
    i64,
    i64_sat,
    is_finite,
    is_inf,
    is_nan,
    lerp,
    likely,
    log,
    logical_and,
    logical_not,
    logical_or,
    max,
    min,
    mux,
    popcount,
    pow,
    print,
    print_when,
    random_float,
    random_int,
    random_uint,
    reinterpret,
    require,
    round,
    saturating_cast,
    select,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    u8,
    u8_sat,
    u16,
    u16_sat,
    u32,
    u32_sat,
    u64,
    u64_sat,
    undef,
)
from .param import Argument, ArgumentEstimates, ArgumentKind, Dimension, ImageParam, OutputImageParam, Param
from .pipeline import Callable, Module, Pipeline, Realization, StmtOutputFormat, last_profile_report
from .scatter_gather import gather, scatter
from .schedule import LoopAlignStrategy, LoopLevel, MemoryType, Partition, PrefetchBoundStrategy, TailStrategy
from .scheduling import EvictionKey
from .serialization import deserialize_parameters, deserialize_pipeline, serialize_pipeline
from .target import (
    DeviceAPI,
    Target,
    TargetArch,
    TargetFeature,
    TargetOS,
    TargetProcessorTune,
    get_host_target,
    get_jit_target_from_environment,
    get_target_from_environment,
    host_supports_target_device,
    target_arch_is,
    target_bits,
    target_feature_for_device_api,
    target_has_feature,
    target_natural_vector_size,
    target_os_is,
)
from .types import BFloat, Bool, Float, Handle, Int, Type, TypeCode, UInt
from .var import Range, RDom, RVar, Var, VarOrRVar, _

_0, _1, _2, _3, _4, _5, _6, _7, _8, _9 = (Var.implicit(i) for i in range(10))  # Halide's implicit Vars

# Deep pipelines make deep (but finite) IR; Python 3.11 frames are cheap.
_sys.setrecursionlimit(20000)

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("__") and name != "_sys"]
