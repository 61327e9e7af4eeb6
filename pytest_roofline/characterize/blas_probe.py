"""Roofs from libraries alone: DRAM bandwidth from a large triad, peaks from BLAS/torch GEMM.

Used as the quick first characterization and as the fallback when no C compiler is present. It cannot see
the cache levels honestly (per-call overhead hides them), so it reports DRAM only.
"""

from __future__ import annotations

import functools
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from pytest_roofline.characterize.best_of import best_seconds
from pytest_roofline.characterize.validate import EMULATED_SHARE, EXACT_ON


@dataclass
class Roof:
    value: float
    source: str
    detail: dict[str, object] = field(default_factory=dict)


def optional_torch() -> ModuleType | None:
    """torch where it is installed (imported on first use: the characterization runs only under --roofline),
    else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch


def dram_triad(last_level_cache_bytes: int, progress: Callable[[str], None]) -> Roof:
    """a = b + s*c over three arrays 4x the last-level cache together; 32 bytes per fp64 element counted: two
    reads, the write, and the read of the written line before the store (write-allocate, as the analytic
    counter charges it)."""
    total = max(4 * last_level_cache_bytes, 192 * 1024**2)
    n = total // (3 * 8)
    torch = optional_torch()
    if torch is not None:
        a = torch.zeros(n, dtype=torch.float64)
        b = torch.ones(n, dtype=torch.float64)
        c = torch.ones(n, dtype=torch.float64)
        seconds = best_seconds(lambda: torch.add(b, c, alpha=3.0, out=a), warmup=2, min_repeats=5, budget_s=0.4)
        source = "torch-triad"
    else:
        a_np, b_np, c_np = np.zeros(n), np.ones(n), np.ones(n)
        # numpy has no fused triad; a + b is one pass with the same 2 reads + 1 write per element.
        seconds = best_seconds(lambda: np.add(b_np, c_np, out=a_np), warmup=2, min_repeats=5, budget_s=0.4)
        source = "numpy-add"
    rate = 4 * 8 * n / seconds
    progress(f"DRAM {source}: {rate / 1e9:.1f} GB/s over {3 * 8 * n / 2**20:.0f} MiB (write-allocate counted)")
    return Roof(rate, source, {"working_set_bytes": 3 * 8 * n})


GEMM_PRECISIONS = ("fp64", "fp32", "bf16", "fp16")
# (backend, n) per precision: square C = A @ B with contiguous operands and a preallocated output (torch.mm with
# out=; transposed operands and torch.matmul were never faster here). Sizes are where the BLAS peaked on a 2-core
# Sapphire Rapids VM, measured interleaved so that drifts on the host hit every candidate alike:
# - fp64: MKL (torch) is flat from n = 1536 to 3072 (3072 reaches a few % higher at best) and 5-15 % ahead of
#   OpenBLAS (numpy), which stays a candidate for machines where it is the better library.
# - fp32: MKL gains ~3 % from 2048 to 3072 (at 3x the cost per call), ~7 % from 1024 to 2048.
# - bf16: oneDNN/AMX peaks at n = 1280..1536 with both threads, ~1.7x its rate at 2048. It runs n <= 1024 on one
#   thread, which is faster while only one of the two CPUs gets its core's AMX unit undisturbed (common here);
#   768 and 1024 are equal then.
# - fp16: flat from 512 to 3072 (no AMX-FP16 here).
# The host has faster periods (+10-35 %; 3x for AMX) lasting from under a second to a few seconds, and the roof is
# the fastest call: what counts is many calls at sizes near the peak, spread over time.
GEMM_CANDIDATES: dict[str, tuple[tuple[str, int], ...]] = {
    "fp64": (("torch", 2048), ("torch", 3072), ("numpy", 2048)),
    "fp32": (("torch", 2048), ("torch", 3072), ("numpy", 2048)),
    "bf16": (("torch", 1280), ("torch", 1536), ("torch", 768)),
    "fp16": (("torch", 512), ("torch", 1024)),
}
# Shares of the budget: fp64/fp32 calls are long, so they need more time for as many samples; fp16 is steady.
# With 8 s of calls the cold CPU characterization takes 15-16 s on the 2-core VM (limit: 20 s).
GEMM_SHARES = {"fp64": 3.5, "fp32": 2.5, "bf16": 1.5, "fp16": 0.4}
GEMM_BUDGET_S = 8.0        # timed GEMM calls in all, all precisions together
# With the ERT kernel compiled, fp64 and fp32 roofs come from its FMA sweep and their GEMMs only check them
# (validate.py): seconds per precision then, 2.9 s in all instead of 8 (cold characterization -5 s).
ERT_GEMM_SECONDS = {"fp64": 0.5, "fp32": 0.5, "bf16": 1.5, "fp16": 0.4}
# ... and one mid-sized candidate each: a 3072^3 fp64 GEMM alone takes a second on one core.
ERT_GEMM_CANDIDATES = {**GEMM_CANDIDATES, "fp64": (("torch", 1024),), "fp32": (("torch", 1024),)}
BURST_S = 0.04             # a turn: calls of one candidate until this long (at least one call)
# A candidate whose one call would take more than this share of its precision's time is not tried (four calls
# of it must fit): on a CPU without bf16 or fp16 units torch emulates them at about 1 GFLOP/s (2-vCPU Zen 3 VM),
# where a single 1536^3 bf16 call takes 6.5 s and the first turns alone took 15 of the 24 s of a cold
# characterization.
MAX_CALL_SHARE = 0.25
SCOUT_N = 256          # a first, cheap GEMM of each precision: its rate says which candidates are worth a call
LIBRARY_CALLS = 3          # after this many calls, a library below LIBRARY_MARGIN x the other's best is dropped
LIBRARY_MARGIN = 0.9


_clock = time.perf_counter


@dataclass
class _Candidate:
    precision: str
    backend: str
    n: int
    run: Callable[[], object]
    best: float = 0.0
    calls: int = 0
    seconds: float = 0.0

    @property
    def flops(self) -> float:
        return 2.0 * self.n**3

    @property
    def label(self) -> str:
        return f"{self.backend} n={self.n}"

    def turn(self, burst_s: float) -> None:
        """Calls until ``burst_s`` has passed (at least one); keeps the fastest rate."""
        spent = 0.0
        while True:
            start = _clock()
            self.run()
            elapsed = _clock() - start
            spent += elapsed
            self.calls += 1
            self.best = max(self.best, self.flops / elapsed)
            if spent >= burst_s:
                break
        self.seconds += spent


class GemmProbe:
    """The best GEMM FLOP/s per precision: the fastest call of numpy.matmul / torch.mm over the candidates.

    The host is shared and its speed drifts over seconds (on the AMX VM bf16 GEMM switches between ~0.7 and
    ~2.4 TFLOP/s for seconds at a time, fp64 GEMM by 10-20 %), so the calls are spread over time: ``run`` can be
    called several times (the CPU characterization runs it before and after the ERT sweeps), and within a run
    the precisions take turns (shares of the budget) and within a precision the candidates share its time.
    The roof is the fastest call. Noise only ever slows a call down, so the fastest call needs no filtering
    for disturbed calls; a CPU-share filter would even drop good calls, because oneDNN runs small bf16 GEMMs on
    one thread. The first call of each candidate (oneDNN's JIT, page faults on the output) is timed too and simply
    loses to the later ones. A precision's sizes are tried smallest first, and a size whose one call the rate
    reached so far puts above ``MAX_CALL_SHARE`` of the precision's time is left out (``skipped_s`` in the roof's
    detail), judged first by a cheap ``SCOUT_N`` call: an emulated bf16 would otherwise spend the whole
    characterization's budget on three calls. A precision already below half the GEMM of one that computes it
    exactly (bf16 and fp16 on the fp32 units) gets no calls after its first turns, and its share is not spent.
    """

    def __init__(self, precisions: tuple[str, ...] = GEMM_PRECISIONS,
                 candidates: dict[str, tuple[tuple[str, int], ...]] | None = None,
                 shares: dict[str, float] | None = None) -> None:
        self.precisions = precisions
        self.specs = candidates or GEMM_CANDIDATES
        self.shares = shares or GEMM_SHARES
        self.pools: dict[str, list[_Candidate]] | None = None
        self.spent: dict[str, float] = {}
        self.skipped: dict[str, dict[str, float]] = {}  # precision -> {candidate: predicted seconds of one call}
        self.retired: set[str] = set()  # emulated precisions: no calls after their first turns
        self.scouts: dict[str, _Candidate] = {}  # scouts left out of their pool (a candidate was tried)

    def run(self, budget_s: float) -> None:
        """About ``budget_s`` seconds of timed calls, all precisions together, less the shares of the retired."""
        spent_before = dict(self.spent)
        if self.pools is None:
            weights = sum(self.shares.get(p, 1.0) for p in self.precisions) or 1.0
            self.pools = {}
            for precision in self.precisions:
                pool = self._first_turns(precision, MAX_CALL_SHARE * budget_s * self.shares.get(precision, 1.0)
                                         / weights)
                if pool:
                    self.pools[precision] = pool
            self.spent = {precision: sum(c.seconds for c in pool) for precision, pool in self.pools.items()}
            self.spent.update({p: self.spent.get(p, 0.0) + c.seconds for p, c in self.scouts.items()})
            self.retired = self._retire_emulated()
        pools, spent = self.pools, self.spent
        active = [p for p in pools if p not in self.retired]
        weights = sum(self.shares.get(p, 1.0) for p in pools) or 1.0
        limit = budget_s * sum(self.shares.get(p, 1.0) for p in active) / weights
        start = sum(spent_before.get(p, 0.0) for p in active)
        while active and sum(spent[p] for p in active) - start < limit:
            # Fair shares in small turns: the precision furthest behind its share goes next, so each precision's
            # calls are spread over the whole run (cheap ones many times between two calls of an expensive one).
            precision = min(active, key=lambda p: spent[p] / self.shares.get(p, 1.0))
            # Within a precision, every size gets the same time: which one is fastest changes with the state of
            # the host (bf16: one thread wins while only one CPU is fast), so no size is dropped after a few
            # calls. A library clearly behind the other one (OpenBLAS vs MKL here) is, once both had a few calls.
            pool = pools[precision]
            leader = max(pool, key=lambda c: c.best)
            candidate = min((c for c in pool if c.backend == leader.backend or c.calls < LIBRARY_CALLS
                             or c.best >= LIBRARY_MARGIN * leader.best), key=lambda c: c.seconds)
            before = candidate.seconds
            candidate.turn(BURST_S)
            spent[precision] += candidate.seconds - before

    def _first_turns(self, precision: str, most_s: float) -> list[_Candidate]:
        """Every candidate once (operands touched, JIT done), smallest first, each only when the fastest rate so
        far (from a SCOUT_N scout first) puts its one call under ``most_s``; the scout stays in the pool only
        when no candidate could be tried."""
        scout = _scout(precision)
        pool: list[_Candidate] = []
        leaders = [scout] if scout is not None and _first_turn(scout) else []
        for candidate in sorted(_candidates(precision, self.specs[precision]), key=lambda c: c.n):
            leader = max(pool + leaders, key=lambda c: c.best, default=None)
            if leader is not None and candidate.flops / leader.best > most_s:
                if leader.calls == 1:
                    leader.turn(BURST_S)  # its one call may have been mostly the JIT's: judge by a second
                if candidate.flops / leader.best > most_s:
                    self.skipped.setdefault(precision, {})[candidate.label] = candidate.flops / leader.best
                    continue
            if _first_turn(candidate):
                pool.append(candidate)
        if scout is not None and leaders and not pool:
            return [scout]
        if scout is not None and leaders:
            self.scouts[precision] = scout  # its time was spent, on no candidate
        return pool

    def _retire_emulated(self) -> set[str]:
        """The precisions to call no more: below ``EMULATED_SHARE`` x the GEMM of a precision that computes them
        exactly, in two calls at least (a second is made where there was one): their roof will be that
        precision's (validate.reconcile), so more calls could change neither the roof nor the label."""
        pools = self.pools or {}

        def best(precision: str) -> float:
            return max((c.best for c in pools.get(precision, [])), default=0.0)

        def below(precision: str) -> bool:
            return any(best(precision) < EMULATED_SHARE * best(exact) for exact in EXACT_ON.get(precision, ()))

        found: set[str] = set()
        for precision, pool in pools.items():
            if below(precision) and sum(c.calls for c in pool) < 2:
                leader = max(pool, key=lambda c: c.best)
                before = leader.seconds
                leader.turn(BURST_S)  # one call may have been mostly the JIT's
                self.spent[precision] += leader.seconds - before
            if below(precision):
                found.add(precision)
        return found

    def roofs(self, progress: Callable[[str], None]) -> dict[str, Roof]:
        found: dict[str, Roof] = {}
        for precision, pool in (self.pools or {}).items():
            winner = max(pool, key=lambda c: c.best)
            calls = sum(c.calls for c in pool)
            found[precision] = Roof(winner.best, f"{winner.backend}-gemm", {
                "n": winner.n, "calls": calls, "seconds": round(sum(c.seconds for c in pool), 3),
                "candidates": {c.label: c.best for c in pool},
                **({"skipped_s": {label: round(s, 3) for label, s in self.skipped[precision].items()}}
                   if precision in self.skipped else {}),
                **({"retired": "emulated: below half the GEMM of a precision computing it exactly"}
                   if precision in self.retired else {})})
            progress(f"{precision} GEMM: {winner.best / 1e9:.1f} GFLOP/s ({winner.backend}-gemm, n={winner.n}, "
                     f"fastest of {calls} calls)")
        return found


def gemm_roofs(progress: Callable[[str], None], precisions: tuple[str, ...] = GEMM_PRECISIONS,
               budget_s: float = GEMM_BUDGET_S,
               candidates: dict[str, tuple[tuple[str, int], ...]] | None = None) -> dict[str, Roof]:
    """``GemmProbe`` in one run of ``budget_s``."""
    probe = GemmProbe(precisions, candidates)
    probe.run(budget_s)
    return probe.roofs(progress)


def gemm(precision: str, progress: Callable[[str], None], sizes: tuple[int, ...] | None = None,
         budget_s: float = 1.0) -> Roof | None:
    """One precision alone (``sizes``: torch sizes to try instead of the built-in candidates)."""
    candidates = {precision: tuple(("torch", n) for n in sizes)} if sizes else None
    return gemm_roofs(progress, (precision,), budget_s, candidates).get(precision)


def _first_turn(candidate: _Candidate) -> bool:
    """One turn of a candidate not tried yet; False for a torch build without a CPU kernel for its dtype."""
    try:
        candidate.turn(BURST_S)
    except RuntimeError:
        return False
    return True


def _scout(precision: str) -> _Candidate | None:
    """A SCOUT_N GEMM of ``precision`` (torch, else numpy), or None where neither has one."""
    found = _candidates(precision, (("torch", SCOUT_N),)) or _candidates(precision, (("numpy", SCOUT_N),))
    return found[0] if found else None


def _candidates(precision: str, specs: tuple[tuple[str, int], ...]) -> list[_Candidate]:
    torch = optional_torch()
    found: list[_Candidate] = []
    for backend, n in specs:
        if backend == "numpy" and precision in ("fp64", "fp32"):
            a = np.random.default_rng(n).random((n, n)).astype("float64" if precision == "fp64" else "float32")
            found.append(_Candidate(precision, backend, n, functools.partial(np.matmul, a, a, out=np.empty_like(a))))
        elif backend == "torch" and torch is not None:
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
            t = torch.randn(n, n, generator=torch.Generator().manual_seed(n)).to(dtype[precision])
            found.append(_Candidate(precision, backend, n, functools.partial(torch.mm, t, t, out=torch.empty_like(t))))
    return found
