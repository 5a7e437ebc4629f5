"""numba CPU functions compiled ahead of time: a process runs them without importing numba.

Importing numba and setting up its CPU target costs a fresh process most of a second (its
implementation modules, and its BLAS check, which imports SciPy's linear algebra), far more
than a small job's own work. :func:`build` compiles the signatures that a set of ``@njit``
functions has compiled so far in this process into one Python extension module (numba's
``pycc``, which needs a C compiler and the Python headers), for the same CPU model and
features as numba's JIT, with each function's own options (its error model, ``nogil``) and
without ``parallel`` (such a module runs a ``prange`` loop serially; :func:`run_on_threads` and
:func:`map_on_threads` run a row-by-row loop on host threads instead). :func:`lookup` finds the build
of a function for given arguments and imports it, numba-free; it finds none when the
function's source file, numba, llvmlite, the Python version or the CPU changed since the
build (numba's own cache is keyed on the same things), and the caller then calls numba;
:func:`compiled` gives one or the other.

The builds live in ``cpu/`` of the kernel cache folder (:mod:`gpu.cuda.cache_folder`): for each
build name, an extension module and a manifest naming it, its functions' argument types and
the sources and versions it was built from (docs/decisions/cpu-ahead-of-time.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from gpu.cuda.cache_folder import kernel_cache_dir

__all__ = ["build", "build_folder", "compiled", "import_numba_module", "lookup", "missing_build_tools",
           "numba_only", "host_threads", "map_on_threads", "run_on_threads"]

#: a build runs its loops serially and is not cached by numba; ``nogil`` stays, so that a
#: build's loop can run on several host threads (:func:`run_on_threads`)
_BUILD_OPTIONS_DROPPED = ("parallel", "cache")


def build_folder() -> Path:
    """The folder of the ahead-of-time builds: ``cpu/`` in the kernel cache folder."""
    return kernel_cache_dir() / "cpu"


def _versions() -> dict[str, str]:
    """What a build's machine code depends on besides its sources, found without importing
    numba: the interpreter, numba's and llvmlite's version files, and the CPU numba compiles
    for: the model and features it is told (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``: an
    image built on one host for others), else this host's model name and flags."""
    versions = {"python": sys.implementation.cache_tag}
    for package in ("numba", "llvmlite"):
        # the version file, read: importlib.metadata takes longer than the small jobs this serves
        spec = importlib.util.find_spec(package)
        version_file = Path(spec.origin).with_name("_version.py") if spec and spec.origin else None
        versions[package] = _sha256(str(version_file)) if version_file and version_file.is_file() else ""
    cpu = f"{os.environ.get('NUMBA_CPU_NAME')}\0{os.environ.get('NUMBA_CPU_FEATURES')}"
    if not os.environ.get("NUMBA_CPU_NAME"):
        with contextlib.suppress(OSError):
            with open("/proc/cpuinfo") as info:  # the first processor's entry: every core has the same
                for line in iter(info.readline, ""):
                    if line == "\n":
                        break
                    if line.startswith(("model name", "flags")):
                        cpu += line
    versions["cpu"] = hashlib.sha256(cpu.encode()).hexdigest()
    return versions


def _sha256(path: str) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def _argument_spec(numba_type) -> list | None:
    """A numba argument type as a plain list that :func:`_accepts` checks arguments against;
    None for a type this module does not export (the function stays with numba)."""
    from numba.core import types

    if isinstance(numba_type, types.Array):
        return ["array", str(numba_type.dtype), numba_type.ndim, numba_type.layout, not numba_type.mutable]
    if isinstance(numba_type, (types.Integer, types.Float, types.Boolean)):
        return ["scalar", str(numba_type)]
    return None


def _accepts(spec: list, value: Any) -> bool:
    """Whether numba would type ``value`` as the argument type ``spec`` describes (or, for a
    read-only array type, as its writable twin): the extension module's wrappers convert
    without checking, so a mismatch must not reach them."""
    if spec[0] == "scalar":
        return np.ndim(value) == 0 and not isinstance(value, np.ndarray) and np.asarray(value).dtype == np.dtype(spec[1])
    _, dtype, ndim, layout, readonly = spec
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype != np.dtype(dtype):
        return False
    if not readonly and not value.flags.writeable:
        return False
    if not value.flags.aligned:
        return False
    return {"C": value.flags.c_contiguous, "F": value.flags.f_contiguous}.get(layout, True)


@contextlib.contextmanager
def _compiled_as_the_jit_compiles() -> Iterator[dict]:
    """While ``pycc`` compiles: each function with its own options (``functions`` maps its
    Python function to its dispatcher) less those that need numba at run time, and machine
    code for the CPU features numba's JIT targets (``pycc`` takes the CPU model's default
    features, which a virtual machine may not offer)."""
    import numba.pycc.compiler as pycc_compiler
    from numba.core import codegen
    from numba.core.registry import cpu_target

    functions: dict = {}
    compile_extra = pycc_compiler.compile_extra
    aot_features = codegen.AOTCPUCodegen._customize_tm_features

    def compile_with_own_options(typingctx, targetctx, func, args, return_type, flags, locals, library):
        options = {k: v for k, v in functions[func].targetoptions.items() if k not in _BUILD_OPTIONS_DROPPED}
        cpu_target.options.parse_as_flags(flags, options)
        return compile_extra(typingctx, targetctx, func, args, return_type, flags, locals=locals, library=library)

    pycc_compiler.compile_extra = compile_with_own_options
    codegen.AOTCPUCodegen._customize_tm_features = codegen.JITCPUCodegen._customize_tm_features
    try:
        yield functions
    finally:
        pycc_compiler.compile_extra = compile_extra
        codegen.AOTCPUCodegen._customize_tm_features = aot_features


def _source_files(py_func: Callable) -> set[str]:
    """The files of the Python code numba compiles into ``py_func``: its module's, and those of
    the functions of this project (its package's or this one's) it calls by name, directly or
    through their module (``register_jitable`` functions, other ``@njit`` functions: numba
    inlines or links them), and theirs in turn. A change to any of them makes a build stale."""
    own = {py_func.__module__.partition(".")[0], __name__.partition(".")[0]}
    files: set[str] = set()
    seen: set[int] = set()
    pending = [py_func]
    while pending:
        function = pending.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        files.add(sys.modules[function.__module__].__file__)
        names, codes = set(), [function.__code__]
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
        for name in names:
            value = function.__globals__.get(name)
            if isinstance(value, ModuleType):
                if value.__name__.partition(".")[0] in own and getattr(value, "__file__", None):
                    files.add(value.__file__)
                    pending.extend(getattr(value, n) for n in names if _is_own_function(getattr(value, n, None), own))
            elif _is_own_function(value, own):
                pending.append(getattr(value, "py_func", value))
    return files


def _is_own_function(value: Any, own: set[str]) -> bool:
    function = getattr(value, "py_func", value)  # an @njit dispatcher: its Python function
    return callable(function) and hasattr(function, "__code__") and function.__module__.partition(".")[0] in own


def missing_build_tools() -> str | None:
    """What the build lacks on this machine, said so that a user can install it; None when
    it has a C compiler and the Python headers."""
    compiler = sysconfig.get_config_var("CC") or "cc"
    if shutil.which(compiler.split()[0]) is None:
        return f"no C compiler ({compiler.split()[0]}): install gcc"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers}): install python3-dev"
    return None


def build(name: str, dispatchers: Sequence, folder: Path | None = None) -> Path:
    """Compile every signature that each ``@njit`` dispatcher has compiled in this process
    into one extension module, the build ``name`` (replacing an earlier one, keeping one of
    the same functions, sources and versions); returns the module's path. Needs a C compiler
    and the Python headers (``pycc``)."""
    import warnings

    from numba import config
    from numba.core.errors import NumbaPendingDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)  # pycc, kept until numba offers another
        from numba.pycc import CC

    folder = Path(folder or build_folder())
    folder.mkdir(parents=True, exist_ok=True)
    functions: dict[str, list] = {}
    sources: dict[str, str] = {}
    exported = []
    for dispatcher in dispatchers:
        py_func = dispatcher.py_func
        qualname = f"{py_func.__module__}.{py_func.__qualname__}"
        for overload in dispatcher.overloads.values():
            specs = [_argument_spec(t) for t in overload.signature.args]
            if None in specs:
                continue
            export = f"f{len(exported)}"
            functions.setdefault(qualname, []).append({"export": export, "args": specs})
            exported.append((export, overload.signature, dispatcher))
        for source in _source_files(py_func):
            sources[source] = _sha256(source)
    manifest = {**_versions(), "sources": sources, "functions": functions}
    key = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    module = f"{name}_{key}"
    with open(folder / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build of a name at a time; released on close
        current = _built(folder, name, module)
        if current is not None:  # the same functions, sources and versions: a warm-up again is quick
            return current
        with tempfile.TemporaryDirectory(dir=folder) as scratch, _compiled_as_the_jit_compiles() as by_function:
            cc = CC(module)
            cc.output_dir = scratch
            cc.target_cpu = config.CPU_NAME or "host"
            for export, signature, dispatcher in exported:
                by_function[dispatcher.py_func] = dispatcher
                cc.export(export, signature)(dispatcher.py_func)
            cc.compile()
            built = next(Path(scratch).glob(f"{module}.*"))
            target = folder / built.name
            os.replace(built, target)
            manifest_tmp = Path(scratch) / "manifest.json"
            manifest_tmp.write_text(json.dumps({**manifest, "module": module, "file": target.name}, indent=1))
            os.replace(manifest_tmp, folder / f"{name}.json")
        for old in folder.glob(f"{name}_*"):
            if old != target:
                old.unlink(missing_ok=True)
    _loaded.pop(str(folder), None)
    return target


def _built(folder: Path, name: str, module: str) -> Path | None:
    """The build ``name``'s module file where its manifest names ``module``, else None."""
    try:
        manifest = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    path = folder / manifest.get("file", "")
    return path if manifest.get("module") == module and path.is_file() else None


_lock = threading.Lock()
# folder → {qualified name: [(argument specs, function), ...]}, read once per process
_loaded: dict[str, dict[str, list[tuple[list, Callable]]]] = {}
_numba_only = 0


@contextlib.contextmanager
def numba_only() -> Iterator[None]:
    """No build is found inside (:func:`lookup` gives None): the warm-up compiles or loads
    numba's code of every function, which larger runs take, whatever builds exist."""
    global _numba_only
    with _lock:
        _numba_only += 1
    try:
        yield
    finally:
        with _lock:
            _numba_only -= 1


def _load(folder: Path) -> dict[str, list[tuple[list, Callable]]]:
    """Every current build in ``folder``, imported; builds whose sources or versions changed
    are left out."""
    found: dict[str, list[tuple[list, Callable]]] = {}
    manifests = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not manifests:
        return found
    versions = _versions()
    for path in manifests:
        try:
            manifest = json.loads(path.read_text())
            current = all(manifest[k] == v for k, v in versions.items()) and all(
                os.path.exists(source) and _sha256(source) == digest for source, digest in manifest["sources"].items())
            if not current:
                continue
            spec = importlib.util.spec_from_file_location(
                manifest["module"], folder / manifest["file"],
                loader=importlib.machinery.ExtensionFileLoader(manifest["module"], str(folder / manifest["file"])))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (OSError, ValueError, KeyError, ImportError):
            continue  # a build being replaced, or a broken one: numba compiles instead
        for qualname, exports in manifest["functions"].items():
            found.setdefault(qualname, []).extend((e["args"], getattr(module, e["export"])) for e in exports)
    return found


def lookup(qualname: str, args: Sequence) -> Callable | None:
    """The ahead-of-time build of the ``@njit`` function ``qualname`` ("package.module.name")
    for ``args`` (numba's own types of them), or None: no current build holds it."""
    folder = build_folder()
    with _lock:
        if _numba_only:
            return None
        builds = _loaded.get(str(folder))
        if builds is None:
            builds = _loaded[str(folder)] = _load(folder)
    for specs, function in builds.get(qualname, ()):
        if len(specs) == len(args) and all(_accepts(s, a) for s, a in zip(specs, args)):
            return function
    return None


def host_threads() -> int:
    """The threads this process's loops may use: ``NUMBA_NUM_THREADS`` where set (the batch
    pipeline sets each worker process's share of the cores there), else the cores it may
    run on."""
    return int(os.environ.get("NUMBA_NUM_THREADS") or 0) or len(os.sched_getaffinity(0))


_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] | None = None


def map_on_threads(run_chunk: Callable[[int, int], Any], n: int) -> list:
    """``run_chunk(lo, hi)`` for consecutive chunks [lo, hi) of ``n`` rows on
    :func:`host_threads` threads, a few chunks a thread (so that rows of unequal cost even
    out); its results in the chunks' order. For a build of a row-by-row loop whose rows are
    independent and that releases the GIL (declared ``nogil``)."""
    global _pool, _pool_key
    threads = host_threads()
    size = max(1, min(4096, -(-n // (8 * threads))))
    if threads == 1 or n <= size:
        return [run_chunk(0, n)]
    with _lock:
        # a forked child inherits the pool but not its threads: it makes its own
        if _pool is None or _pool_key != (os.getpid(), threads):
            _pool, _pool_key = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ahead-of-time"), \
                (os.getpid(), threads)
        pool = _pool
    return [done.result() for done in [pool.submit(run_chunk, lo, min(n, lo + size)) for lo in range(0, n, size)]]


def run_on_threads(function: Callable, args: Sequence, rows: Sequence[int], n: int) -> None:
    """``function(*args)`` over chunks of ``n`` rows (:func:`map_on_threads`): the arguments at
    indices ``rows`` are arrays of ``n`` rows, cut into chunks, the others are passed whole.
    Where each row writes only its own rows of the outputs, every row's result is the one a
    single call gives."""
    index = set(rows)
    map_on_threads(lambda lo, hi: function(*(a[lo:hi] if i in index else a for i, a in enumerate(args))), n)


_imports = threading.Lock()


def import_numba_module(name: str) -> ModuleType:
    """Import module ``name``, which loads numba, under the process's one lock for such
    imports: two threads importing numba at once can find it half initialised."""
    with _imports:
        return importlib.import_module(name)


def compiled(qualname: str, args: Sequence) -> Callable:
    """The ahead-of-time build of the ``@njit`` function ``qualname`` for ``args`` where a
    current one holds it (:func:`lookup`), else numba's dispatcher (its module imported by
    :func:`import_numba_module`)."""
    function = lookup(qualname, args)
    if function is not None:
        return function
    module, _, name = qualname.rpartition(".")
    return getattr(import_numba_module(module), name)
