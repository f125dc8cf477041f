"""Errors that stop an ingestion, or that it ends with, naming the file and the fix."""


class IngestError(Exception):
    """A source cannot be read at all: names the file, what was found and what was expected."""

    def __init__(self, path: object, problem: str, expected: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}; expected {expected}. Nothing was written.")


class NothingStoredError(IngestError):
    """An ingestion stored no event and found none already stored (``xc_core.stages.ingest``'s one rule, for the
    CLI and the ``raw_events`` asset): the message says why and what to do. An :class:`IngestError`, so that the
    CLI reports it as bad input (one line, exit code 2); ``summary`` keeps the counts."""

    def __init__(self, message: str, summary: object) -> None:
        self.path = "the input"
        self.summary = summary
        Exception.__init__(self, message)
