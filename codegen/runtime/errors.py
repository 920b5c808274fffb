"""The runtime's one error: input that does not match what the generated file was made for."""


class DataError(Exception):
    """Input that does not match features.json (or a flag combination that cannot run); printed as one line, exit
    status 2."""
