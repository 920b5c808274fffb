"""ctrgen: spec + saved NVTabular workflow -> HugeCTR model.py, graph JSON and Triton repositories."""

__version__ = "0.1.0"
