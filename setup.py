"""Declares the compiled twins; all metadata lives in pyproject.toml.

``LOOPCORE_NO_EXTENSIONS=1`` at build time, or an interpreter other than
CPython, skips compiling (a pure-Python install). ``LOOPCORE_DEBUG_CYTHON=1``
turns Cython's safety checks back on; ``LOOPCORE_CYTHON_TRACE=1`` compiles line
tracing in, for coverage of the ``.pyx`` code (much slower: never for a release).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

#: Module names under ``loopcore`` (a dotted one lives in that subpackage).
MODULES = [
    "_fingerprint_c",
    "_outcome_c",
    "_ring_c",
    "_percall_c",
    "batch._rows_c",
    "formats._lines_c",
]


def extensions() -> list[Extension]:
    # Only CPython loads the compiled twins (see the _fingerprint and _history
    # choosers); PyPy and others get the pure-Python twins without a compiler.
    if os.environ.get("LOOPCORE_NO_EXTENSIONS") or sys.implementation.name != "cpython":
        return []
    from Cython.Build import cythonize

    debug = os.environ.get("LOOPCORE_DEBUG_CYTHON") == "1"
    trace = os.environ.get("LOOPCORE_CYTHON_TRACE") == "1"
    directives = {
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": not debug,
        "linetrace": trace,
    }
    # The directive alone emits the hooks; the macro switches them on, and the
    # NOGIL variant also traces the ``nogil`` encoder helpers.
    macros = [("CYTHON_TRACE_NOGIL", "1")] if trace else []
    if os.name == "nt":
        compile_args = []
    elif debug:
        compile_args = ["-O0", "-g"]
    else:
        compile_args = ["-O3", "-g0"]
    # cythonize tracks .pyx, .pxd and .pxi by itself; a plain C header it includes
    # is listed here, so editing only the header rebuilds its module.
    headers = [str(h) for h in Path("src/loopcore").glob("*.h")]
    modules = [
        Extension(
            f"loopcore.{name}",
            [f"src/loopcore/{name.replace('.', '/')}.pyx"],
            include_dirs=["src/loopcore"],
            define_macros=macros,
            extra_compile_args=compile_args,
            depends=headers,
        )
        for name in MODULES
    ]
    # cythonize goes by timestamps only: C generated without tracing or the debug
    # checks would be reused.
    return cythonize(
        modules, compiler_directives=directives, include_path=["src"], force=trace or debug
    )


setup(ext_modules=extensions())
