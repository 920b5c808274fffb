"""Reading a Triton ``config.pbtxt`` into ``tritonclient.grpc.model_config_pb2.ModelConfig``.

Parsing uses ``google.protobuf.text_format`` (environment.md §7), which accepts everything Triton's own parser
accepts in NVIDIA's notebooks (list syntax ``input [ {...}, {...} ]``, ``max_batch_size:64,``, ``kind : KIND_GPU``).
A parse error is reported with its line and column. Parameters are ``string_value`` maps (triton.md §2.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from ..pb import mc

from ...errors import Located
from ...inputs import MAX_META_BYTES, read_text

ModelConfig = mc.ModelConfig


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    text: str
    config: mc.ModelConfig
    repository: Path | None = None    # a generated repository that shares this file (codegen.triton.layout)

    @property
    def model_dir(self) -> Path:
        return self.path.parent

    @property
    def repo_root(self) -> Path:
        """The model repository the model belongs to (Triton's --model-repository)."""
        return self.repository or self.path.parent.parent

    @property
    def name(self) -> str:
        """The model name: ``name`` when set, else the folder name (Triton's rule)."""
        return self.config.name or self.path.parent.name

    def string_param(self, key: str) -> str | None:
        return string_param(self.config, key)

    def line_of_param(self, key: str) -> int | None:
        return find_line(self.text, rf'key\s*:\s*"{re.escape(key)}"')

    def line_of_field(self, field: str) -> int | None:
        return find_line(self.text, rf"^\s*{re.escape(field)}\s*[:{{\[]")

    def line_of_tensor(self, name: str) -> int | None:
        return find_line(self.text, rf'name\s*:\s*"{re.escape(name)}"')




def parse_config_text(text: str) -> mc.ModelConfig:
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as exc:
        line, col = exc.GetLine(), exc.GetColumn()
        message = str(exc)
        # ParseError's text starts with "LINE:COL : "; the location is reported separately.
        message = re.sub(r"^\d+:\d+\s*:\s*", "", message)
        raise Located(message, line, col=col) from None


def load_config(path: Path, repository: Path | None = None) -> ConfigFile:
    """Read and parse one config.pbtxt; raises codegen.errors.Located (with line/col), or UserError for a file that
    is no regular text file of at most MAX_META_BYTES (a FIFO, a link to a device, a huge file: never read whole)."""
    text = read_text(path, "config.pbtxt", MAX_META_BYTES)
    return ConfigFile(path=path, text=text, config=parse_config_text(text), repository=repository)


def string_param(config: mc.ModelConfig, key: str) -> str | None:
    """The ``string_value`` of parameter ``key``, or None when the parameter is absent."""
    if key not in config.parameters:
        return None
    return config.parameters[key].string_value


def dtype_name(value: int) -> str:
    return mc.DataType.Name(value) if value in mc.DataType.values() else str(value)


def kind_name(value: int) -> str:
    kinds = mc.ModelInstanceGroup.Kind
    return kinds.Name(value) if value in kinds.values() else str(value)


def find_line(text: str, pattern: str) -> int | None:
    """1-based line of the first match of ``pattern`` (multiline), or None."""
    m = re.search(pattern, text, flags=re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None
