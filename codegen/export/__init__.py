"""``ctrgen export``: a trained PyTorch run as a model file other runtimes load (ONNX: onnx.py; the run's weights,
Model and validation rows: trained.py; the command: cli.py)."""
