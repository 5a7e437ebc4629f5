"""Moved to :mod:`gpu.compile_notice`; this name stays only until gpu/peaks imports from
there (``from gpu.compile_notice import announce_compile, is_compiled``), then goes."""

from gpu.compile_notice import announce_compile, compiling_on_purpose, is_compiled

__all__ = ["is_compiled", "announce_compile", "compiling_on_purpose"]
