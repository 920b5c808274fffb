"""The click commands ``ctrgen validate`` and ``ctrgen assemble`` (loaded lazily by codegen/cli.py): they open the
spec (the model builder, the pipeline) and hand what it yields to lint/ and deploy/."""
