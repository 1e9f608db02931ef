"""Rich styles for table cells, taken from the active Textual theme.

Cells are `rich.text.Text`, which cannot refer to `$error` the way `.tcss` does; these styles
are resolved from the theme's variables so cells follow the theme like the rest of the app.
Every colour carries a second cue (bold, a word, a symbol) so NO_COLOR stays legible.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App


@dataclass(frozen=True)
class CellStyles:
    error: str
    danger: str  # the error colour without bold, for long runs of error text
    warning: str
    success: str
    accent: str
    muted: str


# Under NO_COLOR the theme's colours become greys that can be hard to read on the background:
# what needs attention is reverse video or bold instead.
NO_COLOR_STYLES = CellStyles(
    error="bold reverse", danger="", warning="bold", success="", accent="", muted="dim"
)


def cell_styles(app: App[object]) -> CellStyles:
    """Styles from the theme now in use (fall back to plain names if a variable is absent)."""
    if app.no_color:
        return NO_COLOR_STYLES
    variables = app.get_css_variables()

    def pick(name: str, fallback: str) -> str:
        value = variables.get(name)
        return value if value and value.startswith("#") else fallback

    return CellStyles(
        error=f"bold {pick('error', 'red')}",
        danger=pick("error", "red"),
        warning=pick("warning", "yellow"),
        success=pick("success", "green"),
        accent=pick("accent", "cyan"),
        muted="dim",
    )


def level_of(age_s: float | None, warn_s: float, crit_s: float) -> str:
    """`ok`, `warn` or `crit` for an oldest-ready age against the thresholds."""
    if age_s is None or age_s < warn_s:
        return "ok"
    return "crit" if age_s >= crit_s else "warn"
