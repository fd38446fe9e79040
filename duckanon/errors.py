"""The one exception users see. Every message is a single line that names the problem."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message (DuckDB's and Spark's run over several), or its type."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


class AnonymizeError(Exception):
    """A request duckanon refuses: bad syntax, bad option, unknown column, infeasible model.

    Raised before anything is written, so the database is unchanged when it reaches the user.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # always one line
