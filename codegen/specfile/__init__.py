# The spec model first: codegen.specfile.embedding_collection builds on its base classes and model.Spec embeds it.
from . import model  # noqa: F401
