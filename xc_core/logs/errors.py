"""Errors that stop an ingestion, or that it ends with, naming the file and the fix."""


class IngestError(Exception):
    """A source cannot be read at all: names the file, what was found and what was expected."""

    def __init__(self, path: object, problem: str, expected: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}; expected {expected}. Nothing was written.")


class NothingAcceptedError(IngestError):
    """Every row read was rejected, or there was none: no event was stored (the rejects are in the quarantine).

    An :class:`IngestError`, so that the CLI reports it as bad input (one line, exit code 2).
    """

    def __init__(self, read: int, rejected: int, files: int) -> None:
        self.path = f"{files} file(s)"
        what = f"all {rejected:,} rows read were rejected" if read else "they hold no rows"
        where = "; the rejected rows are in the quarantine" if read else ""
        Exception.__init__(self, f"nothing accepted from {files} file(s): {what}; no event was stored{where}")
