"""Names that DaCe accepts: SDFG names must be C identifiers."""

import re


def identifier(name: str) -> str:
    """``name`` turned into a C identifier (invalid characters become ``_``; a leading digit gets a ``_``)."""
    cleaned = re.sub(r"\W", "_", name) or "_"
    return f"_{cleaned}" if cleaned[0].isdigit() else cleaned
