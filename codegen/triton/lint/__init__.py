"""``ctrgen validate``'s linter: validate.py reads a repository (modelconfig.py, psjson.py, paths.py; the graph
JSON through codegen/hugectr/graph_reader.py, the reader ctrgen import uses too)
and runs the rule modules (rules_*.py) into findings (findings.py). Depends on no command or pipeline module: the
training side a spec names is read by the command and handed in (tests/test_layout.py)."""
