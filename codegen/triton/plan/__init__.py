"""What ctrgen writes into a Triton model repository, as plain data and text: the planner (repository.py: three
models and ps.json) and its ``config.pbtxt`` writer (configs.py). Depends on the typed model only
(tests/test_layout.py)."""
