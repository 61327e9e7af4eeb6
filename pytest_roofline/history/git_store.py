"""A history on a branch of the repository's remote: ``git:BRANCH`` (``origin``), ``git:REMOTE:BRANCH``.

For teams with no bucket: a CI job with push rights appends each session as one new file in one new commit on
that branch (asv keeps its results in a repository the same way). Nothing touches the work tree, the index or
the user's branches: the branch is fetched into ``refs/roofline-history/BRANCH``, the commit is made with git's
plumbing on a private index, and pushed. A push that is not a fast-forward (another runner pushed first) is
fetched again and redone on the new tip, up to :data:`PUSH_TRIES` times: file names are unique, so redoing is
always a clean merge. Retention removes files from the branch's tip; old sessions stay in its history.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_roofline.errors import StoreError, StoreSettingError
from pytest_roofline.history.store import Entry, safe_name

PUSH_TRIES = 12
GIT_TIMEOUT_S = 120.0
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
        try:
            done = subprocess.run(["git", *args], cwd=self._top, input=data, capture_output=True,
                                  timeout=GIT_TIMEOUT_S, check=False, env={**os.environ, **(env or {})})
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
        result = self.read_many([name], max_bytes)[0]
        if isinstance(result, StoreError):
            raise result
        return result

    def read_many(self, names: Sequence[str], max_bytes: int) -> list[bytes | StoreError]:
        """Every object in one ``git cat-file --batch``, its size checked first (``--batch-check``): a blob over
        ``max_bytes`` is never read."""
        tip = self._tip()
        if tip is None:
            return [StoreError(f"{self.url}/{n}: the branch does not exist") for n in names]
        refused: dict[str, StoreError] = {}
        for name in names:
            try:
                safe_name(name)
            except StoreError as exc:  # a name someone pushed: skipped alone, the others are read
                refused[name] = exc
        found: dict[str, bytes | StoreError] = {}
        sizes = self._git("cat-file", "--batch-check", data="".join(
            f"{tip}:{n}\n" for n in names if n not in refused).encode()).stdout.decode().splitlines()
        small = []
        for name, line in zip([n for n in names if n not in refused], sizes):
            header = line.split()
            if len(header) != 3 or header[1] != "blob":
                found[name] = StoreError(f"{self.url}/{name}: not on the branch")
            elif int(header[2]) > max_bytes:  # refused before its content is read
                found[name] = StoreError(f"{self.url}/{name}: {header[2]} bytes, more than the {max_bytes} a "
                                         "record file may have")
            else:
                small.append(name)
        out = self._git("cat-file", "--batch", data="".join(f"{tip}:{n}\n" for n in small).encode()).stdout \
            if small else b""
        at = 0
        for name in small:
            end = out.index(b"\n", at)
            size = int(out[at:end].split()[2])
            found[name], at = out[end + 1:end + 1 + size], end + 1 + size + 1
        return [refused[n] if n in refused else found[n] for n in names]

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
        for attempt in range(PUSH_TRIES):
            tip = self._fetch()
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
            pushed = self._git("push", "--quiet", "--porcelain", self.remote_name,
                               f"{commit}:refs/heads/{self.branch}", check=False)
            if pushed.returncode == 0:
                self._git("update-ref", self._ref, commit, check=False)
                return gone
            said = _said(pushed)
            whole = _said(pushed, limit=None)  # matched whole: git's hints come before its verdict
            # only a race is retried: another runner pushed first (or was updating the ref that moment). A
            # hook that declined, a protected branch or missing rights are said as git said them
            if not any(w in whole for w in ("non-fast-forward", "fetch first", "stale info", "cannot lock ref",
                                            "failed to update ref", "remote contains work")):
                raise StoreError(f"{self.url}: git push to {self.remote_name!r} failed: {said}")
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))  # redo on the new tip
        raise StoreError(f"{self.url}: the branch moved under {PUSH_TRIES} tries in a row; nothing was pushed "
                         f"(git said: {said})")


def _said(done: subprocess.CompletedProcess[bytes], limit: int | None = 400) -> str:
    text = " ".join(part.decode("utf-8", "replace").strip() for part in (done.stderr or b"", done.stdout or b""))
    return " ".join(text.split())[:limit] or f"exit status {done.returncode}"
