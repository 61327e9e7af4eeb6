"""A history on a branch of the repository's remote: ``git:BRANCH`` (``origin``), ``git:REMOTE:BRANCH``.

For teams with no bucket: a CI job with push rights appends each session as one new file in one new commit on
that branch (asv keeps its results in a repository the same way). Nothing touches the work tree, the index or
the user's branches: the branch is fetched into ``refs/roofline-history/BRANCH``, the commit is made with git's
plumbing on a private index, and pushed. A push that fails is judged by where the remote's branch is now
(``git ls-remote``), never by the words of git's messages (they follow the user's locale, and hooks print
anything): a tip that holds our commit means the push landed (its answer was lost, or it timed out); a tip that
moved means another runner pushed first, and the commit is redone on the new tip, up to :data:`PUSH_TRIES`
times (file names are unique, so redoing is always a clean merge); a tip that stayed where we built means the
remote declined it (a hook, a protected branch, missing rights), an error at once with git's words. Retention
removes files from the branch's tip; old sessions stay in its history.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pytest_roofline.errors import GitTimedOut, StoreError, StoreSettingError
from pytest_roofline.history.store import Entry, NoSuchObject, Read, WriteInDoubt, safe_name

PUSH_TRIES = 12
GIT_TIMEOUT_S = 120.0
BATCH_BYTES = 64 * 2**20  # the most blob bytes one `cat-file --batch` returns: what read_many holds at once
# git's messages in English whatever the user's locale: they are shown, never parsed (LANGUAGE is dropped, as
# gettext would read it before LANG)
_LOCALE = {"LC_ALL": "C", "LANG": "C"}
_BRANCH_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/")


class GitBranchStore:
    remote = True

    def __init__(self, root: Path, remote: str, branch: str) -> None:
        self.root = root
        self.remote_name = remote
        self.branch = branch
        self.url = f"git:{branch}" if remote == "origin" else f"git:{remote}:{branch}"
        self._ref = f"refs/roofline-history/{remote}/{branch}"
        self._fetched = False
        self._top: Path | None = None  # the repository's top: git scopes ls-tree/ls-files to a subfolder cwd

    def __repr__(self) -> str:
        return f"GitBranchStore({self.url!r})"

    @classmethod
    def from_location(cls, text: str, *, where: str, root: Path | None = None) -> GitBranchStore:
        parts = text[len("git:"):].split(":")
        remote, branch = (parts[0], parts[1]) if len(parts) == 2 else ("origin", parts[0])
        if len(parts) > 2 or not branch or not remote or not set(branch) <= _BRANCH_CHARS \
                or not set(remote) <= _BRANCH_CHARS or ".." in branch or branch.startswith(("-", "/")) \
                or branch.endswith(("/", ".lock")) or remote.startswith("-"):
            raise StoreSettingError(f"{where}: {text!r} is not git:BRANCH or git:REMOTE:BRANCH (letters, digits, "
                                    "'.', '_', '-', '/'), e.g. git:roofline-history")
        return cls(Path(root or Path.cwd()), remote, branch)

    # --- git --------------------------------------------------------------------------------------------------

    def _git(self, *args: str, data: bytes | None = None, env: dict[str, str] | None = None,
             check: bool = True) -> subprocess.CompletedProcess[bytes]:
        if self._top is None:
            self._top = self.root  # while asking where the top is
            found = self._git("rev-parse", "--show-toplevel", check=False)
            if found.returncode != 0:
                self._top = None
                raise StoreError(f"{self.url}: {self.root} is not in a git repository: {_said(found)}")
            self._top = Path(found.stdout.decode("utf-8", "surrogateescape").strip())
        environ = {k: v for k, v in os.environ.items() if k != "LANGUAGE"}
        try:
            done = subprocess.run(["git", *args], cwd=self._top, input=data, capture_output=True,
                                  timeout=GIT_TIMEOUT_S, check=False, env={**environ, **_LOCALE, **(env or {})})
        except subprocess.TimeoutExpired:
            raise GitTimedOut(f"{self.url}: git {args[0]} ran past {GIT_TIMEOUT_S:.0f} s and was stopped") from None
        except (OSError, subprocess.SubprocessError) as exc:
            raise StoreError(f"{self.url}: git {args[0]}: {exc}") from None
        if check and done.returncode != 0:
            raise StoreError(f"{self.url}: git {args[0]} failed in {self.root}: {_said(done)}")
        return done

    def _fetch(self) -> str | None:
        """Fetch the branch into the private ref; its tip, or None when the remote has no such branch yet."""
        probe = self._git("ls-remote", "--heads", self.remote_name, f"refs/heads/{self.branch}", check=False)
        if probe.returncode != 0:
            raise StoreError(f"{self.url}: cannot reach the remote {self.remote_name!r} from {self.root}: "
                             f"{_said(probe)}")
        self._fetched = True
        if not probe.stdout.strip():
            self._git("update-ref", "-d", self._ref, check=False)
            return None
        self._git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", self.remote_name,
                  f"+refs/heads/{self.branch}:{self._ref}")
        return self._git("rev-parse", "--verify", self._ref).stdout.decode().strip()

    def _tip(self) -> str | None:
        if not self._fetched:
            return self._fetch()
        done = self._git("rev-parse", "--verify", "--quiet", self._ref, check=False)
        return done.stdout.decode().strip() or None

    # --- the store --------------------------------------------------------------------------------------------

    def entries(self, folder: str | None = None) -> list[Entry]:
        tip = self._fetch()
        if tip is None:
            return []
        args = ["ls-tree", "-r", "-l", "-z", tip]
        if folder is not None:
            args.append(f"{safe_name(folder)}/")
        entries = []
        for line in self._git(*args).stdout.decode("utf-8", "surrogateescape").split("\0"):
            if not line or "\t" not in line:
                continue
            meta, name = line.split("\t", 1)
            fields = meta.split()
            if len(fields) < 4 or fields[1] != "blob" or not name.endswith(".json"):
                continue
            if folder is not None and "/" in name[len(folder) + 1:]:
                continue
            entries.append(Entry(name, int(fields[3]) if fields[3].isdigit() else None, None))
        return sorted(entries, key=lambda e: e.name)

    def read(self, name: str, max_bytes: int) -> bytes:
        for _, result in self.read_many([name], max_bytes):
            if isinstance(result, StoreError):
                raise result
            return result
        raise StoreError(f"{self.url}/{name}: not read")  # read_many yields once per name: never reached

    def read_many(self, names: Sequence[str], max_bytes: int) -> Iterator[Read]:
        """Each object's name with its bytes, or the StoreError reading it raised, in order. Sizes are checked
        first (one ``--batch-check``: a blob over ``max_bytes`` is never read); contents come from ``cat-file
        --batch`` runs of at most :data:`BATCH_BYTES` each, so the window is never held whole."""
        tip = self._tip()
        if tip is None:
            for name in names:
                yield name, NoSuchObject(f"{self.url}/{name}: the branch does not exist")
            return
        sizes: dict[str, int | StoreError] = {}
        for name in names:
            try:
                safe_name(name)
            except StoreError as exc:  # a name someone pushed: skipped alone, the others are read
                sizes[name] = exc
        plain = [n for n in names if n not in sizes]
        checked = self._git("cat-file", "--batch-check", data="".join(f"{tip}:{n}\n" for n in plain).encode()) \
            if plain else None
        for name, line in zip(plain, checked.stdout.decode().splitlines() if checked else []):
            header = line.split()
            if len(header) != 3 or header[1] != "blob" or not header[2].isdigit():
                sizes[name] = NoSuchObject(f"{self.url}/{name}: not on the branch")
            elif int(header[2]) > max_bytes:  # refused before its content is read
                sizes[name] = StoreError(f"{self.url}/{name}: {header[2]} bytes, more than the {max_bytes} a "
                                         "record file may have")
            else:
                sizes[name] = int(header[2])
        batch: list[str] = []  # in order, the refused ones among them: they are yielded in their place
        held = 0
        for name in names:
            size = sizes.get(name, NoSuchObject(f"{self.url}/{name}: not on the branch"))
            if isinstance(size, int) and held and held + size > BATCH_BYTES:
                yield from self._contents(tip, batch, sizes)
                batch, held = [], 0
            batch.append(name)
            held += size if isinstance(size, int) else 0
        yield from self._contents(tip, batch, sizes)

    def _contents(self, tip: str, names: list[str], sizes: dict[str, int | StoreError]) -> Iterator[Read]:
        """``names`` in order: the blobs of those with a size, from one ``cat-file --batch`` on ``tip``; the
        error of the others."""
        readable = [n for n in names if isinstance(sizes[n], int)]
        out, failed = b"", None
        try:
            if readable:
                out = self._git("cat-file", "--batch", data="".join(f"{tip}:{n}\n" for n in readable).encode()).stdout
        except StoreError as exc:
            failed = exc
        at = 0
        for name in names:
            known = sizes[name]
            if isinstance(known, StoreError):
                yield name, known
                continue
            if failed is not None:
                yield name, failed
                continue
            end = out.find(b"\n", at)
            header = out[at:end].split() if end >= 0 else []
            if len(header) != 3 or not header[2].isdigit():  # gone between the size check and the read
                yield name, NoSuchObject(f"{self.url}/{name}: not on the branch")
                at = end + 1 if end >= 0 else len(out)
                continue
            size = int(header[2])
            yield name, out[end + 1:end + 1 + size]
            at = end + 1 + size + 1

    def create(self, name: str, data: bytes) -> None:
        path = safe_name(name)
        blob = self._git("hash-object", "-w", "--stdin", data=data).stdout.decode().strip()
        self._commit(f"roofline history: add {path}", add={path: blob})

    def delete(self, names: Sequence[str]) -> list[str]:
        if not names:
            return []
        paths = [safe_name(n) for n in names]
        try:
            return self._commit(f"roofline history: prune {len(paths)} session(s)", remove=paths)
        except StoreError:
            return []  # retention is best effort

    def _commit(self, message: str, *, add: dict[str, str] | None = None,
                remove: Sequence[str] = ()) -> list[str]:
        """One commit on the branch's tip that adds and removes files, pushed; redone on a newer tip when
        another runner pushed first. The names removed (those that were there)."""
        tip = self._fetch()
        said = ""
        doubtful: list[str] = []  # our commits whose push was stopped: one may land after we looked
        for attempt in range(PUSH_TRIES):
            with tempfile.TemporaryDirectory(prefix="roofline-git-store-") as work:
                env = {"GIT_INDEX_FILE": str(Path(work) / "index")}
                if tip is not None:
                    self._git("read-tree", tip, env=env)
                    present = set(self._git("ls-files", "-z", env=env).stdout.decode(
                        "utf-8", "surrogateescape").split("\0"))
                else:
                    present = set()
                for path, blob in (add or {}).items():
                    if path in present:
                        if tip is not None and any(self._holds(tip, c) for c in doubtful):
                            return []  # a stopped push of ours landed late: the file is ours
                        raise FileExistsError(f"{self.url}/{path}")
                    self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
                gone = [p for p in remove if p in present]
                if remove and not gone:
                    return []
                for path in gone:
                    self._git("update-index", "--force-remove", "--", path, env=env)
                tree = self._git("write-tree", env=env).stdout.decode().strip()
            parents = ["-p", tip] if tip else []
            identity = {"GIT_AUTHOR_NAME": "pytest-roofline", "GIT_AUTHOR_EMAIL": "pytest-roofline@localhost",
                        "GIT_COMMITTER_NAME": "pytest-roofline", "GIT_COMMITTER_EMAIL": "pytest-roofline@localhost"}
            commit = self._git("commit-tree", tree, *parents, "-m", message, env=identity).stdout.decode().strip()
            try:
                pushed: subprocess.CompletedProcess[bytes] | None = self._git(
                    "push", "--quiet", "--porcelain", self.remote_name, f"{commit}:refs/heads/{self.branch}",
                    check=False)
            except GitTimedOut as exc:
                pushed, said = None, str(exc)  # stopped while the remote may have been updating the branch
                doubtful.append(commit)
            if pushed is not None and pushed.returncode == 0:
                self._git("update-ref", self._ref, commit, check=False)
                return gone
            if pushed is not None:
                said = _said(pushed)
            # a pause before looking, which also lets a runner that held the ref's lock (our refusal) finish
            time.sleep(random.uniform(0.1, 0.3) * (attempt + 1))
            now = self._now(commit, said)
            if now is not None and self._holds(now, commit):
                return gone  # it landed: git's answer was lost or came too late
            if now == tip and pushed is not None and _declined(pushed, self.branch):
                # the remote said no to a push on the tip it still has: a hook, a protection, missing rights
                raise StoreError(f"{self.url}: git push to {self.remote_name!r} failed: {said}")
            # the tip moved (another runner pushed first), or the push died before the remote answered and
            # nothing landed: redone on the tip as it is now
            tip = now
        raise StoreError(f"{self.url}: the branch moved under {PUSH_TRIES} tries in a row; nothing was pushed "
                         f"(git said: {said})")

    def _now(self, commit: str, said: str) -> str | None:
        """The remote branch's tip after a push that failed, fetched; WriteInDoubt when the remote cannot be
        asked (the push may have landed)."""
        try:
            return self._fetch()
        except StoreError as exc:
            raise WriteInDoubt(f"{self.url}: git push of {commit[:12]} to {self.remote_name!r} failed ({said}) and "
                               f"whether it landed is unknown: {exc}") from None

    def _holds(self, tip: str, commit: str) -> bool:
        """Whether the fetched ``tip`` is ``commit`` or has it in its history."""
        if tip == commit:
            return True
        return self._git("merge-base", "--is-ancestor", commit, tip, check=False).returncode == 0


def _declined(pushed: subprocess.CompletedProcess[bytes], branch: str) -> bool:
    """Whether ``push --porcelain`` reports our ref rejected (flag ``!``): the remote answered no, as opposed to
    a push that died before any answer. The flag is git's machine-readable status, the same in every locale."""
    for line in (pushed.stdout or b"").decode("utf-8", "replace").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0] == "!" and fields[1].endswith(f":refs/heads/{branch}"):
            return True
    return False


def _said(done: subprocess.CompletedProcess[bytes], limit: int | None = 400) -> str:
    text = " ".join(part.decode("utf-8", "replace").strip() for part in (done.stderr or b"", done.stdout or b""))
    return " ".join(text.split())[:limit] or f"exit status {done.returncode}"
