"""Headers as the application has them, read one name at a time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Union

HeaderValue = Union[str, bytes, Iterable[Union[str, bytes]]]
#: A mapping (a dict, Starlette's or Werkzeug's Headers, an email.message
#: Message) or name/value pairs, in which a repeated header is two pairs.
#: Names and values may be str or (as in an ASGI scope) bytes.
HeadersInput = Union[Mapping[str, HeaderValue], Mapping[bytes, HeaderValue], Iterable[tuple[Union[str, bytes], HeaderValue]]]


def _text(value: str | bytes) -> str:
    # HTTP header bytes are ISO-8859-1 to ASGI and WSGI alike.
    return value.decode("latin-1") if isinstance(value, bytes) else value


def header_values(headers: HeadersInput, name: str) -> list[str]:
    """Every value of the header `name`, in any case. The multi-value
    mappings of web frameworks give every occurrence through `items()`."""
    wanted = name.lower()
    pairs = headers.items() if hasattr(headers, "items") else headers
    values: list[str] = []
    for header, value in pairs:
        if _text(header).lower() != wanted or value is None:
            continue
        if isinstance(value, (str, bytes)):
            values.append(_text(value))
        else:
            values.extend(_text(one) for one in value)
    return values
