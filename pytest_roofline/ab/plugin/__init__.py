"""The pytest glue of A/B: :mod:`.session` (the comparing session and the twin's) and :mod:`.twin_boot` (run
as a script in REF's worktree)."""
