# The spec model first: codegen.spec.embedding_collection builds on its base classes and model.Spec embeds it.
from . import model  # noqa: F401
