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


# A closed set of names longer than this is not listed in a message: it points to where the list is.
_LISTED_AT_MOST = 16


def nearest_name(word: str, known) -> str | None:
    """The known name a mistyped `word` most likely meant, as DuckDB suggests names: the closest by
    difflib's similarity ratio when it is at least 0.7 (one or two letters off in a word of six),
    or the shortest name `word` begins when it is at least 3 letters long (`pop` for `population`);
    None when nothing is that close. Case is ignored."""
    import difflib

    lowered = {name.lower(): name for name in known}
    word = word.lower()
    if word in lowered:
        return lowered[word]
    scored = sorted(((difflib.SequenceMatcher(None, word, name).ratio(), name) for name in lowered),
                    key=lambda pair: (-pair[0], pair[1]))
    if scored and scored[0][0] >= 0.7:
        return lowered[scored[0][1]]
    if len(word) >= 3:
        begun = sorted((name for name in lowered if name.startswith(word)), key=lambda name: (len(name), name))
        if begun:
            return lowered[begun[0]]
    return None


def unknown_name(what: str, word: str, known, where: str | None = None, context: str = "") -> str:
    """The one message for a name outside a closed set (options, methods, mask rules, estimators,
    hierarchy builders, placeholders, ...): `unknown {what} '{word}'{context}`, then the nearest
    known name (`; did you mean 'sensitive'?`), else the names themselves when there are few,
    else `where` they are listed (a set too long to list gives one). `known` is the names, or a
    mapping of each name to how a message shows it (`partial` -> `partial(left, right)`)."""
    shown = dict(known) if isinstance(known, dict) else {name: name for name in known}
    message = f"unknown {what} '{word}'{context}"
    nearest = nearest_name(word, shown)
    if nearest is not None:
        return f"{message}; did you mean '{shown[nearest]}'?"
    if where is None or len(shown) <= _LISTED_AT_MOST:
        return f"{message} (known: {', '.join(shown.values())})"
    return f"{message}; {where}"
