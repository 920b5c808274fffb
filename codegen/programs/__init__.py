"""The static parts of the programs ctrgen generates (task.py, vertex/submit.py, etl.py), as modules that ruff and mypy
check like the rest of codegen. A template includes a part verbatim with ``{{ program("module", "part") }}``
(codegen/template_files.py's ``program_part``): the lines after the module's ``# ctrgen: part NAME`` line up to the next
such line or the end of the file, without the blank lines at either end. What comes before the first part is the
module's own: its docstring, the imports its parts use, and stand-ins for the names the template defines (the
model's facts), which are never included.

A part runs inside the generated program, so it may use only what that program imports (the standard library,
nvtabular, hugectr, google-cloud-aiplatform), never codegen.
"""
