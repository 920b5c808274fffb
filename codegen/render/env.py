"""The Jinja environment over the templates (codegen.template_files finds them); nothing is autoescaped because
every value is pre-rendered by codegen.render.literals (Python) or a JSON/protobuf writer. ``program(module, part)``
gives a template a static part of a generated program, verbatim, from codegen/programs/."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from ..template_files import program_part, templates_root
from .template_cache import bytecode_cache


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    root = templates_root()
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: root.joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=bytecode_cache(),
    )
    env.globals["program"] = program_part
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
