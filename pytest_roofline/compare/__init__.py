"""A/B in one job (``--roofline-compare REF``): the base commit measured beside this one, in lockstep.

- :mod:`.worktree`: REF checked out in a worktree under the roofline dir, kept and reused.
- :mod:`.twin`: the twin pytest process in that worktree, and the pipe both sides talk over.
- :mod:`.lockstep`: the two sides take turns, one call (or one short batch) each, the pair's lead first in each
  turn pair, after one settling turn pair.
- :mod:`.paired_stats`: the paired ratio time(this) / time(REF) with its Wilcoxon interval, and its verdict.
- :mod:`.pool` / :mod:`.pairs`: process pairs (twins of this checkout and of REF) and their interval; the verdict is
  :mod:`pytest_roofline.gates.ab` / :mod:`pytest_roofline.gates.ab_report`.
"""
