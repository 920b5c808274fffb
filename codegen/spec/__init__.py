import os

# pydantic checks each core schema it generates against its own meta-schema before using it, about 0.03 s for the
# spec's 55 models on every ctrgen start (issue 16 item 7). The schemas are pydantic's own output, the same on every
# run: tests/test_startup.py runs that check once instead. The variable is set only while the models are built.
_SKIP = "PYDANTIC_SKIP_VALIDATING_CORE_SCHEMAS"
_was_set = _SKIP in os.environ
os.environ[_SKIP] = "1"
try:
    # The spec model first: codegen.spec.embedding_collection builds on its base classes and model.Spec embeds it.
    from . import model  # noqa: F401
finally:
    if not _was_set:
        del os.environ[_SKIP]
