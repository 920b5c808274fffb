"""``ctrgen validate``'s linter: validate.py reads a repository (modelconfig.py, psjson.py, graphjson.py, paths.py)
and runs the rule modules (rules_*.py) into findings (findings.py). Depends on no command or pipeline module: the
training side a spec names is read by the command and handed in (tests/test_layout.py)."""
