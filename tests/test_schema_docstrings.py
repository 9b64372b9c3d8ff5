"""The tool schema's descriptions come from docstring_parser (runner/schema.py)."""

from __future__ import annotations

from ctxline.runner.schema import docstring


def google(city: str, days: int = 1) -> str:
    """Weather for a city.

    Looks it up.

    Args:
        city (str): The city,
            spelled in English.
        days: How many days.

    Returns:
        The forecast.
    """
    return city


def unreadable(x: int) -> int:
    """Double it.

    :param x: the number
    :returns
    """
    return x


def test_google_types_continuations_and_the_returns_section_stay_out_of_the_text() -> None:
    assert docstring(google) == (
        "Weather for a city.\n\nLooks it up.",
        {"city": "The city, spelled in English.", "days": "How many days."},
    )


def test_a_docstring_no_style_can_read_is_all_description_and_loses_nothing() -> None:
    assert docstring(unreadable) == ("Double it.\n\n:param x: the number\n:returns", {})
    assert docstring(lambda: None) == ("", {})
