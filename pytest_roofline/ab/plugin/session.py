"""pytest glue of ``--roofline-compare REF``: :class:`CompareSession` (this side: starts REF's twin, pairs each
roofline test with it, gates on the paired ratio) and :class:`TwinSession` (the mode of the twin process, which
runs tests only when told and answers turns). The logic lives in :mod:`pytest_roofline.ab`."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Generator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_roofline.fixture_types import RooflineFixture
from pytest_roofline.session.state import RooflineState

if TYPE_CHECKING:
    from pytest_roofline.ab.code_trace import CodeTrace
    from pytest_roofline.ab.parity import CollectError, Missing
    from pytest_roofline.ab.pool import PoolLink, TwinPool
    from pytest_roofline.ab.reach import Reach, TestReach
    from pytest_roofline.ab.worktree import Checkout
    from pytest_roofline.history.nightly import LastNight
    from pytest_roofline.history.store import HistoryStore


def twin_roofline_args(state: RooflineState, machine_file: Path, directory: Path) -> list[str]:
    """The twin's own settings: this session's roofs (no second characterization), no history, no gates of
    its own; the same counter, malloc policy and time budget."""
    s = state.settings
    # NAME=VALUE, one word each: pytest looks for its rootdir among words that are not options, and a path
    # given as a separate word (this session's folder) would move the twin's rootdir out of REF's worktree
    # its own --basetemp inside its folder: a twin leaves with os._exit, so pytest's atexit cleanup of a
    # numbered /tmp/pytest-of-USER/pytest-N (and its lock) never runs
    return ["--roofline", f"--roofline-machine={machine_file}", f"--roofline-dir={directory}",
            f"--basetemp={directory / 'tmp'}",
            "--roofline-history=none", f"--roofline-counter={s.requested_counter}", f"--roofline-malloc={s.malloc}",
            f"--roofline-max-time={s.max_time_s}", f"--roofline-min-time={s.min_time_s}", "-p", "no:cacheprovider",
            "-q"]


class CompareSession:
    """This side of ``--roofline-compare``: registered beside the measuring session's mode."""

    def __init__(self, state: RooflineState, config: pytest.Config,
                 wants_roofline: Callable[[pytest.Item], bool]) -> None:
        self.state = state
        self.config = config
        self.wants_roofline = wants_roofline  # the plugin's own test selection: which tests are paired
        self.twin: TwinPool | None = None
        self.started = False
        self.checkout: Checkout | None = None
        self.missing: dict[str, Missing] = {}  # nodeid -> no twin test, and why
        self.stopped: dict[str, str] = {}  # nodeid -> why: the twin stopped during this test
        self.reach: Reach | None = None  # the change between REF and this checkout (made at the first test)
        self.reached: dict[str, TestReach] = {}  # nodeid -> its comparison under change impact
        # nodeid -> its comparison and trace, until its teardown report (:meth:`_finish`)
        self.finishing: dict[str, tuple[TestReach, CodeTrace]] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A REF that is no commit, or a test path outside the repository, is a usage error before any test."""
        from pytest_roofline.ab.worktree import resolve
        from pytest_roofline.errors import CompareError
        from pytest_roofline.history.nightly import last_back

        where = Path(str(self.config.invocation_params.dir))
        ref = str(self.state.settings.compare)
        try:
            # ``last``: REF comes from the history once the machine is known (resolve_last_night)
            top, _ = resolve("HEAD" if last_back(ref) is not None else ref, where)
        except CompareError as exc:
            raise pytest.UsageError(str(exc)) from None
        outside = paths_outside(list(getattr(self.config.option, "file_or_dir", None) or []), where, top)
        if outside:
            raise pytest.UsageError(
                f"--roofline-compare: {outside!r} is outside the repository at {top}: REF's twin can only run "
                "REF's copy of a test of this repository (give a path inside it, relative or absolute)")

    def _start(self) -> None:
        """REF's worktree and twin, once, before the first roofline test (the machine is known by then)."""
        self.started = True
        from pytest_roofline._atomic import write_json_atomic
        from pytest_roofline.ab.pool import TwinPool
        from pytest_roofline.ab.worktree import Checkout, prepare
        from pytest_roofline.errors import CompareError

        state = self.state
        s = state.settings
        assert s.compare is not None
        if state.compare_skipped is not None:
            return  # ``last`` found no REF: the baseline gate judges (resolve_last_night)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        say = None if reporter is None else (lambda line: reporter.write_line(f"roofline: {line}", yellow=True))
        try:
            self.checkout = prepare(state.compare_commit or s.compare, Path(str(self.config.invocation_params.dir)),
                                    say=say)
            folder = state.session_dir / "compare"
            machine_file = write_json_atomic(folder / "machine.json", state.machine().to_dict())
            # both sides in pairs of fresh processes, measured by the same code (docs/ab-compare.md)
            this = Checkout("(this checkout)", "", self.checkout.toplevel, self.checkout.toplevel,
                            self.checkout.subdir)
            self.twin = TwinPool.start(this, self.checkout, self.config.invocation_params.args,
                                       lambda name: twin_roofline_args(state, machine_file.resolve(),
                                                                       (folder / f"twin-{name}").resolve()),
                                       folder, python=s.compare_python, count=s.compare_pairs)
        except (CompareError, OSError) as exc:
            state.compare_error = str(exc) if isinstance(exc, CompareError) else f"--roofline-compare: {exc}"
        state.compare_ref = None if self.checkout is None else {"ref": s.compare, "commit": self.checkout.commit,
                                                                 "worktree": str(self.checkout.path)}

    def _reach(self) -> Reach | None:
        """The session's change impact, made at the first roofline test (None: REF could not be resolved,
        the A/B gate does not run)."""
        if self.reach is None and self.state.compare_skipped is None:
            from pytest_roofline.ab.reach import Reach
            from pytest_roofline.ab.worktree import resolve
            from pytest_roofline.errors import CompareError
            from pytest_roofline.history.nightly import last_back

            s = self.state.settings
            try:
                top, commit = resolve(self.state.compare_commit or str(s.compare),
                                      Path(str(self.config.invocation_params.dir)))
            except CompareError as exc:
                self.state.compare_error = str(exc)
                return None
            forced = ("--roofline-compare-all" if s.compare_all else
                      "a nightly (last) compares every test" if last_back(str(s.compare)) is not None else None)
            self.reach = Reach(top, commit, forced)
        return self.reach

    def _begin(self, nodeid: str, site: int) -> PoolLink | None:
        """The pool's link for ``nodeid`` from call site ``site`` on; the pool starts here, at the first test
        the change reaches, or never."""
        if not self.started:
            began = time.monotonic()
            self._start()
            if self.reach is not None:
                self.reach.cost.pool_start_s += time.monotonic() - began
        if self.twin is None:
            return None
        began = time.monotonic()
        link = self.twin.begin_test(nodeid, site)
        if self.reach is not None:
            self.reach.cost.paired_s += time.monotonic() - began
        if link is None:
            self.missing[nodeid] = self.twin.missing(nodeid)
        return link

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object],
                             request: pytest.FixtureRequest) -> Generator[None, object, object]:
        """What a fixture's setup runs, kept for every test that uses it: a shared fixture is built for the
        first test that asks for it only, and the later ones take its result."""
        reach = self.reach
        if reach is None or reach.forced is not None or reach.reaches_none:
            return (yield)
        trace = reach.trace()
        trace.start()
        try:
            return (yield)
        finally:
            trace.stop()
            reach.record_fixture(fixture_key(fixturedef), trace)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item,
                                nextitem: pytest.Item | None) -> Generator[None, object, object]:
        if not self.wants_roofline(item):
            return (yield)
        from pytest_roofline.ab.impact import Reason
        from pytest_roofline.ab.reach import TestReach

        reach = self._reach()
        if reach is None:
            if not self.started:  # REF given but unresolvable, or ``last`` found none: said in the summary
                self._start()
            return (yield)
        trace = reach.trace()
        defs = fixture_defs(item)
        fixtures = [fixture_key(d) for d in defs]
        own = fixture_functions(defs, reach.root)
        test = TestReach(item.nodeid, lambda: reach.reaches(item.nodeid, trace, fixtures, own),
                         lambda site: self._begin(item.nodeid, site), cost=reach.cost)
        self.reached[item.nodeid] = test
        self.state.compare_link = test
        if reach.forced is not None:
            test.begin_now(Reason("compare-all", reach.forced))  # before setup, nothing to trace
        elif not reach.reaches_none:
            trace.start()
        self.finishing[item.nodeid] = (test, trace)
        try:
            return (yield)
        finally:
            self._finish(item.nodeid)  # where its teardown report never came (an interrupted session)
            self.state.compare_link = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        if call.when == "teardown":
            self._finish(item.nodeid)  # the test's own code is done; its record is built from this report
        return (yield)

    def _finish(self, nodeid: str) -> None:
        """End the test's comparison: stop its trace, end its twins' test, and put on its entry what the
        comparison says of it (REF's outcome, why it was compared, or why not)."""
        found = self.finishing.pop(nodeid, None)
        if found is None:
            return
        test, trace = found
        trace.stop()  # a trace never started: nothing to stop
        entry = self.state.tests.get(nodeid)
        link = test.link
        if link is not None and self.twin is not None:
            began = time.monotonic()
            done = self.twin.end_test(link)
            test.cost.paired_s += time.monotonic() - began
            if entry is not None and done is not None:
                entry.extra.setdefault("compare", {})["ref_outcome"] = done.get("outcome")
            if entry is not None and nodeid in self.stopped:
                entry.extra["compare"] = {"verdict": "error", "explanation": self.stopped[nodeid]}
            elif entry is not None and test.reason is not None:
                entry.extra.setdefault("compare", {})["reached"] = str(test.reason)
        elif entry is not None and nodeid in self.missing:
            why = self.missing[nodeid]
            entry.extra["compare"] = {"verdict": why.verdict, "explanation": why.explanation}
        elif entry is not None and test.unchanged and self.state.compare_error is None:
            from pytest_roofline.ab.reach import UNCHANGED
            from pytest_roofline.ab.site_timer import UNCHANGED_NOTE

            entry.extra["compare"] = {"verdict": UNCHANGED, "explanation": UNCHANGED_NOTE}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        """A test REF could not run beside this one fails, with the twin's own words: never a pass, and never
        a traceback from the plugin's pipe to the twin."""
        from pytest_roofline.errors import TwinStopped

        try:
            result = yield
        except TwinStopped as exc:
            self.stopped[item.nodeid] = f"not compared: {exc}"
            self._label(item.nodeid, "error", self.stopped[item.nodeid])  # before the report copies it (JUnit)
            pytest.fail(f"roofline: not compared with REF: {exc}", pytrace=False)
        why = self.missing.get(item.nodeid)
        if why is not None:
            self._label(item.nodeid, why.verdict, why.explanation)
            if why.verdict == "error":
                pytest.fail(f"roofline: {why.explanation}", pytrace=False)
        return result

    def _label(self, nodeid: str, verdict: str, explanation: str) -> None:
        entry = self.state.tests.get(nodeid)
        if entry is not None:
            entry.extra["compare"] = {"verdict": verdict, "explanation": explanation}

    def _cost_line(self, terminalreporter: pytest.TerminalReporter) -> None:
        """How many tests were compared, how many were unchanged at REF, why every test was compared (where it
        was), and what the comparison cost."""
        from pytest_roofline._safe_text import printable

        reach = self.reach
        if reach is None:
            return
        compared = sum(1 for t in self.reached.values() if t.begun)
        unchanged = sum(1 for t in self.reached.values() if t.unchanged)
        terminalreporter.write_line(printable(f"roofline: {reach.cost.describe(compared, unchanged)}"))
        forced = reach.compare_all() if self.reached else None
        if forced is not None:
            terminalreporter.write_line(printable(f"roofline: compare: every test compared: {forced}"))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.twin is not None:
            self.twin.stop()
        if self.checkout is not None:
            self.checkout.release()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_roofline._safe_text import printable

        try:
            state = self.state
            if state.compare_error:
                terminalreporter.write_line(printable(f"roofline: {state.compare_error}"), red=True)
            if state.compare_skipped:
                terminalreporter.write_line(printable(f"roofline: {state.compare_skipped}"), yellow=True)
            self._cost_line(terminalreporter)
            if state.compare_ref is None:
                return
            from pytest_roofline.ab.verdict_text import process_effects, summary_lines
            from pytest_roofline.record.ab_record import ABRecord

            blocks = [(e.nodeid, ABRecord.from_dict(e.extra.get("compare") or {})) for e in state.tests.values()
                      if e.recorder is not None]
            records = [(n, r if r.compared or r.verdict in ("error", "new", "unchanged") else None)
                       for n, r in blocks]
            for line in summary_lines(state.compare_ref["ref"], state.compare_ref["commit"], records):
                terminalreporter.write_line(printable(line))
            from pytest_roofline.ab.paired_stats import AUTO_BANDS

            # under the auto band, against its wide end: pairs that disagree by less are the usual
            effects = process_effects(records, state.settings.compare_max_slowdown or AUTO_BANDS[1])
            if effects is not None:
                terminalreporter.write_line(f"roofline: compare: {effects}", yellow=True)
            if self.twin is not None and self.twin.error:
                terminalreporter.write_line(printable(f"roofline: compare: {self.twin.error}"), red=True)
            grow_error = getattr(self.twin, "grow_error", None)
            if grow_error:
                terminalreporter.write_line(printable(f"roofline: compare: no further process pair could start, "
                                                      f"call sites were judged on fewer: {grow_error}"), yellow=True)
            room_note = getattr(self.twin, "room_note", None)
            if room_note:
                terminalreporter.write_line(printable(f"roofline: compare: the pool of process pairs stayed smaller "
                                                      f"than --roofline-compare-pairs for want of memory ({room_note})"
                                                      ), yellow=True)
        except Exception as exc:  # noqa: BLE001 - the summary must never turn a finished run into an error
            terminalreporter.write_line(f"roofline: could not write the compare summary: {exc!r}")


def fixture_key(fixturedef: pytest.FixtureDef[object]) -> str:
    """One fixture definition, whatever test asks for it: its name and where it is defined."""
    return f"{fixturedef.baseid}::{fixturedef.argname}"


def fixture_defs(item: pytest.Item) -> list[pytest.FixtureDef[object]]:
    """Every fixture definition the test's closure uses (overridden ones included: they may be requested)."""
    info = getattr(item, "_fixtureinfo", None)
    groups = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    return [definition for group in groups.values() for definition in group]


def fixture_functions(defs: list[pytest.FixtureDef[object]], root: Path) -> list[tuple[str, str]]:
    """The fixture functions as (path under ``root``, qualified name): their code reaches the test even when a
    shared fixture was built before its trace began."""
    from pytest_roofline.ab.code_trace import block_name

    found = []
    top = str(root.resolve())
    for definition in defs:
        code = getattr(getattr(definition, "func", None), "__code__", None)
        if code is None:
            continue
        path = os.path.realpath(code.co_filename)
        if path.startswith(top + os.sep):
            found.append((Path(path).relative_to(top).as_posix(),
                          block_name(getattr(code, "co_qualname", code.co_name))))
    return found


def paths_outside(positional: list[str], where: Path, top: Path) -> str | None:
    """The first test path given on the command line that lies outside the repository at ``top``."""
    root = top.resolve()
    for arg in positional:
        path = Path(str(arg).split("::", 1)[0])
        absolute = (path if path.is_absolute() else where / path).resolve()
        if absolute != root and root not in absolute.parents:
            return str(arg)
    return None


class TwinSession:
    """The twin process: collect, tell the comparing side which tests exist, then run each test it names."""

    def __init__(self, state: RooflineState) -> None:
        from pytest_roofline.ab.channel import Channel
        from pytest_roofline.ab.follower import Follower
        from pytest_roofline.ab.twin import FD_VARIABLE

        self.state = state
        sock = socket.socket(fileno=int(os.environ.pop(FD_VARIABLE)))
        self.channel = Channel(sock)
        self.follower = Follower(self.channel)
        self.outcomes: dict[str, str] = {}
        self.collect_errors: list[CollectError] = []

    def pytest_configure(self, config: pytest.Config) -> None:
        """Serial, whatever REF's ``addopts`` say (``-n 2``): a twin under xdist would collect nothing itself.
        Runs before xdist's own (trylast) pytest_configure decides whether to distribute."""
        if hasattr(config.option, "numprocesses"):
            config.option.numprocesses = 0
            config.option.dist = "no"
            config.option.tx = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """REF's collection errors, told to the comparing side so a test missing here says why."""
        if report.failed:
            from pytest_roofline.ab.parity import CollectError

            self.collect_errors.append(CollectError(report.nodeid, report.longreprtext[-4000:]))

    @pytest.fixture
    def roofline(self, request: pytest.FixtureRequest) -> RooflineFixture:
        """Measure a callable: ``y = roofline.measure(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)``."""
        from pytest_roofline.measure.regions import Recorder

        state = self.state
        recorder = Recorder(enabled=True, machine=state.machine, counter=state.counter,
                            policy=state.settings.timing_policy())
        recorder.site_timer = self.follower
        self.follower.start_test()
        return recorder

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """REF's outcome of each test, for the comparing side's record ("failed in setup" when it never ran)."""
        if report.when == "call":
            self.outcomes[report.nodeid] = report.outcome
        elif report.outcome != "passed":
            self.outcomes[report.nodeid] = f"{report.outcome} in {report.when}"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Nobody reads a twin's summary: once pytest's runner tore the session's fixtures down (its
        sessionfinish runs before this trylast one), leave without the terminal summary, the other plugins'
        unconfigure, the second half of hook wrappers, atexit handlers (hence the twin's own ``--basetemp``) and
        the interpreter's teardown, which took 3 s per twin with torch loaded."""
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(exitstatus))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        from pytest_roofline.errors import ChannelClosed

        items = {item.nodeid: item for item in session.items}
        following = {item.nodeid: after for item, after in zip(session.items, [*session.items[1:], None])}
        self.state.machine()  # the pinned roofs, loaded before the first turn
        try:
            self.channel.send(op="collected", nodeids=sorted(items), rootdir=str(session.config.rootpath),
                              errors=[asdict(error) for error in self.collect_errors])
            while True:
                message = self.channel.receive()
                if message["op"] == "exit":
                    break
                if message["op"] != "run" or message.get("nodeid") not in items:
                    continue  # a late end_test of a test that ended on its own
                item = items[message["nodeid"]]
                keep_shared_fixtures(session, item)
                # the next test in collection order: its module and session fixtures stay built, as in a plain
                # session, where the test body would otherwise run its shared fixtures' setup every time
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=following[item.nodeid])
                self.channel.send(op="test_done", nodeid=item.nodeid, outcome=self.outcomes.get(item.nodeid))
        except ChannelClosed:
            pass  # the comparing session ended or died: nothing left to do
        return True


def keep_shared_fixtures(session: pytest.Session, item: pytest.Item) -> None:
    """Tear down what the twin's previous test kept for the test expected next, where ``item`` is another one:
    the comparing side runs only the tests the change reaches, so the next test asked for is not always the next
    in collection order. pytest's own setup state does it, as its runner does between two items."""
    setup_state = getattr(session, "_setupstate", None)
    teardown = getattr(setup_state, "teardown_exact", None)
    if teardown is not None:
        try:
            teardown(item)
        except Exception:  # noqa: BLE001,S110 - a shared fixture's failed teardown: the twin's next test still runs
            pass


LAST_WINDOW = 1000  # the newest sessions of this machine searched for the branch's last night (pull requests'
# sessions on the same machine may come between)


def resolve_last_night(state: RooflineState, config: pytest.Config) -> Path | HistoryStore | None:
    """``--roofline-compare last`` (``last~N``): REF is the commit of this machine's and branch's newest
    session in ``--roofline-history`` (``state.compare_commit``). Without one (a first night, a history that
    cannot be read, a commit this clone has not fetched) the A/B gate does not run and says why
    (``state.compare_skipped``); the history to fall back on is returned for the baseline gate (None when
    ``--roofline-baseline`` names one already or there is no history)."""
    from pytest_roofline.ab.worktree import resolve
    from pytest_roofline.errors import CompareError, StoreError
    from pytest_roofline.history.environment import git_state
    from pytest_roofline.history.nightly import last_back, resolve_last
    from pytest_roofline.history.reader import load
    from pytest_roofline.record.machine_key import machine_key

    s = state.settings
    back = last_back(s.compare)
    if back is None:
        return None
    history = s.history
    fallback = history if s.baseline is None else None
    judge = fallback if fallback is not None else s.baseline
    then = ("only the thresholds judge" if judge is None
            else f"the baseline gate judges against {getattr(judge, 'url', judge)}")
    label = getattr(history, "url", str(history))
    if history is None:
        state.compare_skipped = f"--roofline-compare {s.compare}: no A/B: --roofline-history is none; {then}"
        return None
    key = machine_key(state.machine().to_dict())
    git = git_state(config.rootpath)
    try:
        loaded = load(history, key=key, recent=LAST_WINDOW)
    except StoreError as exc:
        state.compare_skipped = f"--roofline-compare {s.compare}: no A/B: {exc}; {then}"
        state.store_error = f"the history {label} could not be read for --roofline-compare {s.compare}: {exc}"
        return fallback
    blind = loaded.blind()
    if blind is not None:  # the last night may be among what could not be read: never guess an older one
        state.compare_skipped = f"--roofline-compare {s.compare}: no A/B: {blind}; {then}"
        state.store_error = f"the history {label} could not be read for --roofline-compare {s.compare}: {blind}"
        return fallback
    night = resolve_last(loaded.sessions, key=key, branch=git.branch, head=git.commit, back=back,
                         where=label)
    if night.commit is None:
        state.compare_skipped = f"--roofline-compare {s.compare}: no A/B: {night.why}; {then}"
        return fallback
    where = Path(str(config.invocation_params.dir))
    try:
        _, commit = resolve(night.commit, where)
        head = resolve("HEAD", where)[1] if git.commit else None
    except CompareError:
        state.compare_skipped = (f"--roofline-compare {s.compare}: no A/B: the last night's commit "
                                 f"{night.commit[:12]} is not in this clone (fetch the branch's history: "
                                 f"actions/checkout with fetch-depth: 0); {then}")
        return fallback
    refused = refuse_ref(night, commit, head)
    if refused is not None:
        state.compare_skipped = f"--roofline-compare {s.compare}: no A/B: {refused}; {then}"
        state.store_error = refused
        return fallback
    state.compare_commit = commit
    return None


def refuse_ref(night: LastNight, resolved: str, head: str | None) -> str | None:
    """Why the session ``last`` chose cannot be REF (None: it can): git must resolve its commit to that very
    object id, and it must not be the commit under test (the gate would compare the code with itself)."""
    source = night.session.source if night.session is not None else "the history"
    if resolved != night.commit:
        return (f"refused {source}: its commit {str(night.commit)[:40]!r} resolves to {resolved[:12]}, "
                "another object")
    if head is not None and resolved == head:
        return f"refused {source}: its commit {resolved[:12]} is the commit under test (HEAD)"
    return None
