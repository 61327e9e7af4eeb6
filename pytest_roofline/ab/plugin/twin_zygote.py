"""Started by the comparing session as ``PYTHON twin_zygote.py PACKAGE_DIR [CHECKOUT...]`` (the fd of its control socket in
``PYTEST_ROOFLINE_ZYGOTE_FD``): imports once what every twin imports (torch and numpy where installed, pytest,
this plugin), then forks one twin per request. A twin started as a new interpreter spent ~3.5 s of CPU on those
imports; ten of them on a 2-core runner were a quarter of a compare session.

Nothing of either checkout is imported here: the zygote's folder is dropped from ``sys.path`` and its cwd is not
on it, so each twin imports its own checkout's code after the fork; a zygote whose imports reached into one of
the CHECKOUTs (the project under test is a library torch imports) ends at once and twins start as new
interpreters. No tensor is made and no OpenMP region or CUDA context begun (they do not survive a fork); each
twin reseeds Python's and numpy's global generators, as a new process would have them. Python's hash seed and
the address-space layout are the zygote's, shared by every twin; so each twin first scatters its own layout
(:func:`_scatter_layout`): twins that allocate alike would otherwise put their buffers at the same addresses.

Protocol (``SOCK_SEQPACKET``, one JSON message each way): ``{"op": "spawn", "argv", "cwd", "env", "log"}`` with the
twin's socket as an attached fd -> ``{"pid"}``; ``{"op": "status", "pid"}`` -> ``{"status"}`` (the exit status
once the twin has ended, else null). The zygote ends when the control socket closes.
"""

import sys

if __name__ == "__main__":  # this script's folder holds a select.py: nothing is imported from it
    sys.path.pop(0)

import importlib.util
import json
import math
import mmap
import os
import random
import select
import socket
import traceback

ZYGOTE_FD = "PYTEST_ROOFLINE_ZYGOTE_FD"
TWIN_FD = "PYTEST_ROOFLINE_TWIN_FD"  # ab.twin.FD_VARIABLE
SCATTER_MAPS = 8  # untouched reserves a twin maps first, each of 1 to SCATTER_PAGES pages
SCATTER_PAGES = 512
SCATTER_BLOCKS = 200  # untouched blocks a twin takes from the heap first, each 32 B to 512 KiB (log-uniform)
_scattered: list = []  # held for the twin's life: what it frees would be the next thing allocated there


def _scatter_layout(rng: random.Random) -> None:
    """Give this forked twin an address-space layout of its own. A fork starts from the zygote's heap and
    mappings, so twins that allocate the same buffers in the same order get the same addresses (a new
    interpreter differs in its address-space randomization and hash seed), and the pairs started together would
    share one draw of what those addresses do to a call (cache sets, 4K aliasing): on the CPU VM a conv's
    fresh pairs read 2-4 % apart from the pairs that had run before, as a group. Anonymous reserves of random
    sizes, never touched, take gaps of the zygote's mappings (where large buffers are mapped under glibc's
    default thresholds); blocks of random sizes taken from the heap, never touched (only malloc's headers), take
    holes of its heap and move its top (where a tuned malloc, ``--roofline-malloc tuned``, puts every buffer).
    Fewer did not do: in a zygote with torch imported, 1 reserve and 50 blocks left a 4 MiB buffer where an
    unscattered fork had it in 5 of 8 forks, and a 64 KiB one in 1 of 8; 8 and 200: none of 8."""
    for _ in range(SCATTER_MAPS):
        pages = rng.randrange(1, SCATTER_PAGES + 1)
        _scattered.append(mmap.mmap(-1, pages * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE))
    try:
        import ctypes

        malloc = ctypes.CDLL(None).malloc
    except (ImportError, OSError, AttributeError):  # no C library to ask: the reserves alone
        return
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    low, high = math.log(32), math.log(512 * 1024)
    _scattered.extend(malloc(int(math.exp(rng.uniform(low, high)))) for _ in range(SCATTER_BLOCKS))


def _twin_boot():  # type: ignore[no-untyped-def]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "twin_boot.py")
    spec = importlib.util.spec_from_file_location("_pytest_roofline_twin_boot", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _preload(boot, package_dir: str) -> None:  # type: ignore[no-untyped-def]
    boot._load_plugin_package(package_dir)
    for name in ("torch", "numpy"):  # what makes a twin slow to start; absent is fine
        try:
            __import__(name)
        except Exception:  # noqa: BLE001, S110 - the twin imports (or fails on) it itself
            pass
    # what every twin imports first, warmed by name: the zygote itself uses none of it
    for name in ("pytest", "pytest_roofline.plugin"):
        importlib.import_module(name)


def _child(boot, request: dict, fd: int, control: socket.socket) -> None:  # type: ignore[no-untyped-def]
    """The twin: never returns into the zygote's loop."""
    code = 70
    try:
        control.close()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[TWIN_FD] = str(fd)
        random.seed()  # a new process seeds from the OS; a fork would repeat the zygote's sequence
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        _scatter_layout(random.Random())
        sys.argv = [request["argv"][0], *request["argv"][1:]]
        code = int(boot.run(request["argv"][1:]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - said in the twin's log, which the comparing side shows
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(statuses: dict) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        statuses[pid] = os.waitstatus_to_exitcode(status)


def main() -> int:
    boot = _twin_boot()
    control = socket.socket(fileno=int(os.environ.pop(ZYGOTE_FD)))
    _preload(boot, sys.argv[1])
    avoid = [os.path.realpath(path) + os.sep for path in sys.argv[2:]]
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if not isinstance(where, str) or not os.path.isabs(where):  # torch.ops says "_ops.py": no place
            continue
        where = os.path.realpath(where)
        installed = f"{os.sep}site-packages{os.sep}" in where or f"{os.sep}dist-packages{os.sep}" in where
        if not installed and any(where.startswith(folder) for folder in avoid):  # a checkout's own code (an
            # editable install of the project under test); a virtualenv inside the repository is not
            print(f"pytest-roofline zygote: {name} was imported from {where}, a compared checkout: no forks")
            return 3
    import gc

    gc.collect()
    gc.freeze()  # a twin's collections leave the zygote's objects alone: no copy-on-write faults in its turns
    statuses: dict = {}
    while True:
        _reap(statuses)
        if not select.select([control], [], [], 0.2)[0]:
            continue
        data, fds, _, _ = socket.recv_fds(control, 1 << 20, 1)
        if not data:  # the comparing session has ended
            return 0
        request = json.loads(data)
        if request.get("op") == "status":
            _reap(statuses)
            control.send(json.dumps({"status": statuses.get(int(request["pid"]))}).encode())
            continue
        if not fds:
            control.send(json.dumps({"error": "no socket came with the spawn request"}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(fds[0])
            control.send(json.dumps({"error": f"fork: {exc}"}).encode())
            continue
        if pid == 0:
            _child(boot, request, fds[0], control)
        os.close(fds[0])
        control.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    sys.exit(main())
