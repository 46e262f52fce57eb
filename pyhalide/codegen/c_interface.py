"""The C text around an ahead-of-time object (aot.py): its header, and a CPython extension module
that calls it with numpy arrays (Halide's `python_extension` output, built the same way: compile
it with the object into a shared library named after the function).

Both declare Halide's buffer type themselves, with HalideRuntime.h's layout, unless that header
was included first: a program may build its buffers with Halide's own helpers.
"""

from __future__ import annotations

from ..types import Type
from .aot import EntryArgument, halide_type_code

BUFFER_T = """\
#ifndef HALIDE_HALIDERUNTIME_H  /* Halide's runtime header declares the same types */
#ifndef PYHALIDE_HALIDE_BUFFER_T
#define PYHALIDE_HALIDE_BUFFER_T
struct halide_type_t {
    uint8_t code;  /* 0 int, 1 uint, 2 float, 3 handle, 4 bfloat */
    uint8_t bits;
    uint16_t lanes;
};
typedef struct halide_dimension_t {
    int32_t min, extent, stride;  /* stride in elements */
    uint32_t flags;
} halide_dimension_t;
typedef struct halide_buffer_t {
    uint64_t device;
    const struct halide_device_interface_t *device_interface;
    uint8_t *host;
    uint64_t flags;
    struct halide_type_t type;
    int32_t dimensions;
    halide_dimension_t *dim;
    void *padding;
} halide_buffer_t;
#endif
#endif
"""


def c_type(t: Type) -> str:
    if t.is_bool():
        return "bool"
    if t.is_float():
        return {32: "float", 64: "double"}[t.bits]
    return f"{'u' if t.is_uint() else ''}int{t.bits}_t"


def parameters(arguments: list[EntryArgument]) -> str:
    return ", ".join("void *__user_context" if a.is_user_context else f"struct halide_buffer_t *{a.c_name}"
                     if a.is_buffer else f"{c_type(a.type)} {a.c_name}" for a in arguments) or "void"


def _declarations(fn_name: str, arguments: list[EntryArgument]) -> str:
    return (f"int {fn_name}({parameters(arguments)});\n"
            f"/* the same, args[i] pointing to scalar argument i, or being buffer argument i */\n"
            f"int {fn_name}_argv(void **args);\n")


def header(fn_name: str, arguments: list[EntryArgument], target) -> str:
    """The header declaring the entry (and the buffer type it takes)."""
    guard = f"PYHALIDE_{fn_name.upper()}_H"
    return (f"/* {fn_name}: compiled ahead of time by pyhalide for {target}.\n"
            f"   Returns 0, or -1 after calling halide_error(user_context, message). */\n"
            f"#ifndef {guard}\n#define {guard}\n\n#include <stdbool.h>\n#include <stdint.h>\n\n"
            f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n{BUFFER_T}\n"
            f"{_declarations(fn_name, arguments)}\n"
            f"#ifdef __cplusplus\n}}  /* extern \"C\" */\n#endif\n\n#endif  /* {guard} */\n")


_EXTENSION_RUNTIME = r"""
#if defined(_MSC_VER)
#define PYHALIDE_THREAD_LOCAL __declspec(thread)
#else
#define PYHALIDE_THREAD_LOCAL __thread
#endif

/* The pipeline's error message, for the exception (this halide_error replaces the object's default). */
static PYHALIDE_THREAD_LOCAL char pyhalide_message[1024];

PYHALIDE_EXTERN_C void halide_error(void *user_context, const char *message) {
    (void)user_context;
    strncpy(pyhalide_message, message, sizeof(pyhalide_message) - 1);
    pyhalide_message[sizeof(pyhalide_message) - 1] = 0;
}

/* Whether a buffer-protocol format describes elements of the given Halide type code and bytes. */
static inline int pyhalide_format_matches(const char *format, int code, Py_ssize_t itemsize, Py_ssize_t bytes) {
    const char *kinds[] = {"bhilqn", "BHILQN?", "efd"};
    if (format == NULL) {
        format = "B";
    }
    if (*format == '@' || *format == '=' || *format == '<') {
        format++;
    }
    if (*format == 0 || format[1] != 0 || itemsize != bytes || code > 2) {
        return 0;
    }
    if (*format == '?') {
        return code == 1 && bytes == 1;
    }
    return strchr(kinds[code], *format) != NULL;
}

/* Dimension i's min of an hl.Buffer (its dim(i).min()). */
static inline int pyhalide_buffer_min(PyObject *obj, int i, int32_t *out) {
    PyObject *dim = PyObject_CallMethod(obj, "dim", "i", i), *min;
    long value;
    if (dim == NULL) {
        return -1;
    }
    min = PyObject_CallMethod(dim, "min", NULL);
    Py_DECREF(dim);
    if (min == NULL) {
        return -1;
    }
    value = PyLong_AsLong(min);
    Py_DECREF(min);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int32_t)value;
    return 0;
}

/* A Python object's buffer as a halide_buffer_t: numpy's axes reversed (the last is dimension 0),
   strides in elements, as Halide's extensions take them; mins 0 for a numpy array, an hl.Buffer's
   own mins (its set_min). */
static inline int pyhalide_to_buffer(PyObject *obj, const char *name, int code, int bits, int dimensions, int writable,
                                     Py_buffer *view, halide_buffer_t *buffer, halide_dimension_t *dim) {
    Py_ssize_t bytes = bits == 1 ? 1 : bits / 8;
    int flags = writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO, i, has_mins = 0;
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        /* an object without the buffer protocol that numpy can view (an hl.Buffer): its view */
        PyObject *array;
        int got;
        if (!PyErr_ExceptionMatches(PyExc_TypeError) || !PyObject_HasAttrString(obj, "__array__")) {
            return -1;
        }
        PyErr_Clear();
        array = PyObject_CallMethod(obj, "__array__", NULL);
        if (array == NULL) {
            return -1;
        }
        got = PyObject_GetBuffer(array, view, flags);
        Py_DECREF(array); /* the view holds its own reference */
        if (got < 0) {
            return -1;
        }
        has_mins = PyObject_HasAttrString(obj, "dim");
    }
    if (view->ndim != dimensions) {
        PyErr_Format(PyExc_ValueError, "Invalid argument %s: Expected %d dimensions, got %d", name, dimensions,
                     view->ndim);
        PyBuffer_Release(view);
        return -1;
    }
    if (!pyhalide_format_matches(view->format, code, view->itemsize, bytes)) {
        PyErr_Format(PyExc_ValueError, "Invalid argument %s: its elements ('%s', %zd bytes) are not the type the "
                     "pipeline takes (type code %d, %d bits)", name, view->format ? view->format : "B",
                     view->itemsize, code, bits);
        PyBuffer_Release(view);
        return -1;
    }
    for (i = 0; i < dimensions; i++) {
        Py_ssize_t extent = view->shape[dimensions - 1 - i], stride = view->strides[dimensions - 1 - i];
        if (stride % bytes != 0 || extent > INT32_MAX || stride / bytes > INT32_MAX || stride / bytes < INT32_MIN) {
            PyErr_Format(PyExc_ValueError, "Invalid argument %s: dimension %d (extent %zd, stride %zd bytes) does "
                         "not fit a halide_buffer_t", name, i, extent, stride);
            PyBuffer_Release(view);
            return -1;
        }
        dim[i].min = 0;
        if (has_mins && pyhalide_buffer_min(obj, i, &dim[i].min) < 0) {
            PyBuffer_Release(view);
            return -1;
        }
        dim[i].extent = (int32_t)extent;
        dim[i].stride = (int32_t)(stride / bytes);
        dim[i].flags = 0;
    }
    memset(buffer, 0, sizeof(*buffer));
    buffer->host = (uint8_t *)view->buf;
    buffer->type.code = (uint8_t)code;
    buffer->type.bits = (uint8_t)bits;
    buffer->type.lanes = 1;
    buffer->dimensions = dimensions;
    buffer->dim = dim;
    return 0;
}

/* A Python number as a Param's value, in [lo, hi] for integers. (The helpers are inline: a pipeline
   without integer Params or buffers leaves some unused, which -Wall must not flag.) */
static inline int pyhalide_to_integer(PyObject *obj, const char *name, long long lo, long long hi, long long *out) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "Invalid argument %s: %lld is out of the range of its type", name, v);
        return -1;
    }
    *out = v;
    return 0;
}
"""

_RANGES = {(True, 8): ("-128", "127"), (True, 16): ("-32768", "32767"), (True, 32): ("INT32_MIN", "INT32_MAX"),
           (True, 64): ("LLONG_MIN", "LLONG_MAX"), (False, 8): ("0", "255"), (False, 16): ("0", "65535"),
           (False, 32): ("0", "UINT32_MAX")}


def _convert_scalar(a: EntryArgument, k: int) -> list[str]:
    """C statements reading argument k (a Param's value) from py_k into v_k; `goto done` on failure."""
    t, src, dst = a.type, f"py_{k}", f"v_{k}"
    if t.is_float():
        return [f"{dst} = ({c_type(t)})PyFloat_AsDouble({src});",
                f"if ({dst} == -1 && PyErr_Occurred()) goto done;"]
    if t.is_bool():
        return [f"wide = PyObject_IsTrue({src});", "if (wide < 0) goto done;", f"{dst} = wide != 0;"]
    if t.is_uint() and t.bits == 64:
        return [f"{dst} = PyLong_AsUnsignedLongLong({src});",
                f"if ({dst} == (uint64_t)-1 && PyErr_Occurred()) goto done;"]
    lo, hi = _RANGES[t.is_int(), t.bits]
    return [f"if (pyhalide_to_integer({src}, \"{a.name}\", {lo}, {hi}, &wide) < 0) goto done;",
            f"{dst} = ({c_type(t)})wide;"]


def python_extension(fn_name: str, arguments: list[EntryArgument]) -> str:
    """C source (also valid C++) of a CPython extension module `fn_name` whose function `fn_name`
    takes the entry's arguments by position or keyword: numpy arrays (or any buffer-protocol
    object) for buffers, Python numbers for Params. It runs the pipeline with the GIL released and
    raises RuntimeError with the pipeline's message if it fails."""
    context = [a for a in arguments if a.is_user_context]
    arguments = [a for a in arguments if not a.is_user_context]  # (the module passes NULL as the user context)
    n = len(arguments)
    decls = ["int rc;", "long long wide = 0;", "PyObject *result = NULL;"]
    decls += [f"PyObject *py_{k} = NULL;" for k in range(n)]
    body, release, call = [], [], []
    for k, a in enumerate(arguments):
        if a.is_buffer:
            decls += [f"Py_buffer view_{k};", f"halide_dimension_t dim_{k}[{max(a.dimensions, 1)}];",
                      f"halide_buffer_t buffer_{k};", f"int have_{k} = 0;"]
            body += [f"if (pyhalide_to_buffer(py_{k}, \"{a.name}\", {halide_type_code(a.type)}, {a.type.bits}, "
                     f"{a.dimensions}, {int(a.is_output)}, &view_{k}, &buffer_{k}, dim_{k}) < 0) goto done;",
                     f"have_{k} = 1;"]
            release.append(f"if (have_{k}) PyBuffer_Release(&view_{k});")
            call.append(f"&buffer_{k}")
        else:
            decls.append(f"{c_type(a.type)} v_{k};")
            body += _convert_scalar(a, k)
            call.append(f"v_{k}")
    keywords = ", ".join(f'"{a.name}"' for a in arguments)
    pointers = ", ".join(f"&py_{k}" for k in range(n))
    lines = [
        f"/* {fn_name} as a CPython extension module, written by pyhalide. Build it with the object:",
        f"   cc -shared -fPIC $(python3-config --includes) {fn_name}.py.cpp {fn_name}.o "
        f"-o {fn_name}$(python3-config --extension-suffix) -lpthread */",
        "#define PY_SSIZE_T_CLEAN", "#include <Python.h>", "#include <limits.h>", "#include <stdbool.h>",
        "#include <stdint.h>", "#include <string.h>", "",
        "#ifdef __cplusplus", '#define PYHALIDE_EXTERN_C extern "C"', "#else", "#define PYHALIDE_EXTERN_C",
        "#endif", "", BUFFER_T,
        f"PYHALIDE_EXTERN_C int {fn_name}({parameters(context + arguments)});", _EXTENSION_RUNTIME,
        f"static PyObject *pyhalide_call_{fn_name}(PyObject *module, PyObject *args, PyObject *kwargs) {{",
        f"    static const char *keywords[] = {{{keywords + ', ' if keywords else ''}NULL}};",
        *[f"    {d}" for d in decls],
        "    (void)module;",
        f"    if (!PyArg_ParseTupleAndKeywords(args, kwargs, \"{'O' * n}:{fn_name}\", (char **)keywords"
        f"{', ' + pointers if pointers else ''})) {{",
        "        return NULL;", "    }",
        *[f"    {s}" for s in body],
        "    pyhalide_message[0] = 0;",
        "    Py_BEGIN_ALLOW_THREADS",
        f"    rc = {fn_name}({', '.join(['NULL'] * len(context) + call)});",
        "    Py_END_ALLOW_THREADS",
        "    if (rc != 0) {",
        "        if (pyhalide_message[0]) {",
        "            PyErr_SetString(PyExc_RuntimeError, pyhalide_message);",
        "        } else {",
        "            PyErr_Format(PyExc_RuntimeError, \"Halide Runtime Error: %d\", rc);",
        "        }",
        "        goto done;", "    }",
        "    result = Py_None;", "    Py_INCREF(result);",
        "done:",
        *[f"    {s}" for s in release],
        "    (void)wide;",
        "    return result;", "}", "",
        "static PyMethodDef pyhalide_methods[] = {",
        f"    {{\"{fn_name}\", (PyCFunction)(void (*)(void))pyhalide_call_{fn_name}, METH_VARARGS | METH_KEYWORDS,",
        f"     \"{fn_name}({', '.join(a.name for a in arguments)}): run the pipeline (buffers are numpy arrays, "
        "axes reversed as in Halide)\"},",
        "    {NULL, NULL, 0, NULL}};", "",
        f"static struct PyModuleDef pyhalide_module = {{PyModuleDef_HEAD_INIT, \"{fn_name}\", NULL, -1, "
        "pyhalide_methods, NULL, NULL, NULL, NULL};", "",
        f"PyMODINIT_FUNC PyInit_{fn_name}(void) {{", "    return PyModule_Create(&pyhalide_module);", "}", "",
    ]
    return "\n".join(lines)
