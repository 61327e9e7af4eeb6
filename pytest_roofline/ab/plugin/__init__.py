"""The pytest glue of A/B: :mod:`.session` (the comparing session and the twin's), :mod:`.twin_boot` and
:mod:`.twin_zygote` (run as scripts in REF's worktree)."""
