"""``ctrgen assemble``'s logic: a deployable repository = the generated one + the saved workflow + the trained files
(assemble.py), and the workflow-against-lock comparison (lock_check.py). The command reads the spec and hands the
plan and the features in (tests/test_layout.py)."""
