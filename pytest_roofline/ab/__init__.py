"""A/B in one job (``--roofline-compare REF``): the base commit measured beside this one, in lockstep.

- :mod:`.worktree`: REF checked out in a worktree under the roofline dir, kept and reused.
- :mod:`.twin`, :mod:`.channel`: the twin pytest processes in that worktree (fresh interpreters) and the pipe
  both sides talk over.
- :mod:`.lockstep`, :mod:`.follower`, :mod:`.cuda_turns`: the two sides take turns, one call (or one short
  batch) each, the pair's lead first in each turn pair, after one discarded turn pair.
- :mod:`.pool`, :mod:`.pairs`, :mod:`.room`: process pairs (twins of this checkout and of REF) and when a call
  site has enough of them.
- :mod:`.paired_stats`: the paired ratio time(this) / time(REF) with its intervals.
- :mod:`.verdict`: the A/B verdict of a test, decided in one place; :mod:`.report`: its message and the A/B table.
- :mod:`.plugin`: the pytest glue (the comparing session, the twin's session, the twin's boot).
- ``python -m pytest_roofline bisect`` (:mod:`pytest_roofline.commands.bisect`) runs these between commits.
"""
