"""Copies between host and device memory around the host statements that touch GPU data.

Assumes: gpu_kernels has run (kernels are `gpu_launch` intrinsics naming the buffers they use).

Guarantees: the buffers the kernels use follow Halide's model of a host and a device copy, each
possibly dirty. The runtime copies a buffer to the device at a launch when its host copy is newer
(and marks what a kernel writes device-dirty); this pass makes the host side explicit: a host
statement that reads or writes such a buffer is preceded by `gpu_copy_to_host(name)` (nothing
happens unless the device copy is newer) and, if it writes it, followed by
`gpu_host_written(name)`; a host allocation a kernel uses ends with `gpu_free(name)`, releasing
its device copy. Statements are wrapped at the outermost level that launches no kernel.
"""

from __future__ import annotations

from .. import ir
from ..types import Int
from .gpu_kernels import Touched, Touches, map_statements

COPY_TO_HOST, HOST_WRITTEN, FREE = "gpu_copy_to_host", "gpu_host_written", "gpu_free"


def runtime_call(op: str, name: str) -> ir.Stmt:
    return ir.Evaluate(ir.Call(Int(32), op, (ir.StringImm(name),), ir.INTRINSIC))


class _Inserter:
    def __init__(self, device: set[str], touched: Touches):
        self.device, self.touched = device, touched

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        t = self.touched(s)
        if not t.launches:
            return self._wrap(s, t)
        if isinstance(s, ir.Allocate) and s.name in self.device:
            body = ir.make_block([self.stmt(s.body), runtime_call(FREE, s.name)])
            return ir.Allocate(s.name, s.type, s.extents, body, s.memory_type)
        return map_statements(s, self.stmt)  # into Blocks, loops, lets, ifs (a launch has none)

    def _wrap(self, s: ir.Stmt, t: Touched) -> ir.Stmt:
        used = sorted((t.reads | t.writes) & self.device)
        if not used:
            return s
        before = [runtime_call(COPY_TO_HOST, n) for n in used]
        after = [runtime_call(HOST_WRITTEN, n) for n in sorted(t.writes & self.device)]
        return ir.make_block([*before, s, *after])


def gpu_host_copies(stmt: ir.Stmt) -> ir.Stmt:
    touched = Touches()
    device = touched(stmt).launches
    if not device:
        return stmt
    return _Inserter(device, touched).stmt(stmt)
