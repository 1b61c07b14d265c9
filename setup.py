"""Declares the compiled twins; all metadata lives in pyproject.toml.

``LOOPCORE_NO_EXTENSIONS=1`` at build time skips compiling (a pure-Python
install); ``LOOPCORE_DEBUG_CYTHON=1`` turns Cython's safety checks back on.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

MODULES = ["_fingerprint_c", "_history_c"]


def extensions() -> list[Extension]:
    if os.environ.get("LOOPCORE_NO_EXTENSIONS"):
        return []
    from Cython.Build import cythonize

    debug = os.environ.get("LOOPCORE_DEBUG_CYTHON") == "1"
    directives = {
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": not debug,
    }
    if os.name == "nt":
        compile_args = []
    elif debug:
        compile_args = ["-O0", "-g"]
    else:
        compile_args = ["-O3", "-g0"]
    modules = [
        Extension(
            f"loopcore.{name}",
            [f"src/loopcore/{name}.pyx"],
            include_dirs=["src/loopcore"],
            extra_compile_args=compile_args,
        )
        for name in MODULES
    ]
    return cythonize(modules, compiler_directives=directives, include_path=["src"])


setup(ext_modules=extensions())
