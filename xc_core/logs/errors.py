"""Errors that stop an ingestion before anything is written."""


class IngestError(Exception):
    """A source cannot be read at all: names the file, what was found and what was expected."""

    def __init__(self, path: object, problem: str, expected: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}; expected {expected}. Nothing was written.")
