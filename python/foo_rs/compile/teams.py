"""The OpenMP regions of foo's compiled kernels run on foo's own threads.

Inductor's C++ kernels are parallel OpenMP code: a ``#pragma omp parallel`` region per kernel,
with ``omp for`` loops, ``omp single`` blocks and per-thread partial sums indexed by
``omp_get_thread_num()``. GCC compiles these constructs to calls of five libgomp functions
(``GOMP_parallel``, ``GOMP_barrier``, ``GOMP_single_start``, ``omp_get_thread_num``,
``omp_get_num_threads``; the static schedule of ``omp for`` is computed inline). Run by libgomp
on foo, they would start a second set of spinning threads beside foo's pool, and the backward
graph, which autograd runs on its foo device thread, a second libgomp team, after which libgomp
counts more threads than cores and makes every team, the CPU's included, sleep between regions
(graph_options.py has the measurements).

So every kernel of a foo graph is compiled with ``PRELUDE``: hidden definitions of those
functions (and ``omp_get_max_threads``) in the kernel's own library, which the kernel's calls
bind to instead of libgomp's, each calling foo's team runtime (src/runtime/team.rs): a region
runs on the calling thread and the foo helpers that are free at that moment, barriers and
``single`` included. The prelude finds foo's functions as weak symbols, which resolve because
``import foo_rs`` makes foo's library global (``foo_rs.compile.promote_symbols``); a kernel
loaded where they do not (foo_rs not imported) runs each region on one thread, which OpenMP
allows.

The scheduling is inductor's ``CppScheduling`` with this prelude in each kernel group's source;
the kernels are otherwise the CPU's, character for character.
"""

from __future__ import annotations

from torch._inductor.codegen.cpp import CppScheduling, KernelGroup

# After the include of cpp_prefix.h (which includes omp.h, whose declarations these match).
_CPP_PREFIX = "#include <torch/csrc/inductor/cpp_prefix.h>"

PRELUDE = r"""
// foo_rs: this kernel's OpenMP regions run on foo's threads (python/foo_rs/compile/teams.py).
#ifndef FOO_RS_OPENMP_ON_FOO_TEAMS
#define FOO_RS_OPENMP_ON_FOO_TEAMS
extern "C" {
__attribute__((weak)) void foo_team_run(void (*)(void*), void*, unsigned);
__attribute__((weak)) void foo_team_barrier(void);
__attribute__((weak)) bool foo_team_single_start(void);
__attribute__((weak)) int foo_team_thread_num(void);
__attribute__((weak)) int foo_team_num_threads(void);
__attribute__((weak)) int foo_team_max_threads(void);
__attribute__((visibility("hidden"))) void GOMP_parallel(void (*fn)(void*), void* data,
                                                         unsigned threads, unsigned) {
    if (foo_team_run) foo_team_run(fn, data, threads); else fn(data);
}
__attribute__((visibility("hidden"))) void GOMP_barrier(void) {
    if (foo_team_barrier) foo_team_barrier();
}
__attribute__((visibility("hidden"))) bool GOMP_single_start(void) {
    return foo_team_single_start ? foo_team_single_start() : true;
}
__attribute__((visibility("hidden"))) int omp_get_thread_num(void) noexcept {
    return foo_team_thread_num ? foo_team_thread_num() : 0;
}
__attribute__((visibility("hidden"))) int omp_get_num_threads(void) noexcept {
    return foo_team_num_threads ? foo_team_num_threads() : 1;
}
__attribute__((visibility("hidden"))) int omp_get_max_threads(void) noexcept {
    return foo_team_max_threads ? foo_team_max_threads() : 1;
}
}
#endif
"""


def with_prelude(source: str) -> str:
    """A kernel group's source with ``PRELUDE`` after inductor's own header."""
    if not source or PRELUDE in source:
        return source
    head, found, tail = source.partition(_CPP_PREFIX)
    if not found:
        raise AssertionError("inductor's C++ kernel source no longer includes cpp_prefix.h")
    return head + found + PRELUDE + tail


class FooKernelGroup(KernelGroup):
    def codegen_group(self, name: str | None = None) -> str:
        return with_prelude(super().codegen_group(name))


class FooCppScheduling(CppScheduling):
    """Inductor's C++ scheduling, whose kernels run their OpenMP regions on foo's threads."""

    def reset_kernel_group(self) -> None:
        self.kernel_group = FooKernelGroup()
