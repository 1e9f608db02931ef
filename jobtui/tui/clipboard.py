"""Copy a row's id, payload or traceback: to the terminal's clipboard, or to a file.

The clipboard is reached through OSC 52 (Textual's `App.copy_to_clipboard`), which works over
SSH and tmux but gets no reply: a terminal that ignores it (macOS Terminal, the Linux console,
tmux with `set-clipboard off`, GNU screen) fails silently. So the notice never claims more than
was done: "sent to the terminal clipboard". When the environment says OSC 52 will not arrive
(`osc52_blocked`), the text is saved to a file instead and the notice names it; and `Y` always
saves to a file. Files are not written on every copy: payloads can hold secrets, and a file is
written only when the operator asked or the clipboard cannot work. Files are private (0600) in
jobtui's state directory.

What is copied is what the screen shows: ids as digits, payloads as the console's JSON (control
characters escaped), tracebacks with control characters made visible, so pasting the text into
a terminal cannot inject escape sequences.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual.app import App

from jobtui.export import state_dir
from jobtui.inert import clean, payload_json
from jobtui.models import DeadLetterRow, JobRow


@dataclass(frozen=True)
class Clip:
    """One thing that can be copied: `name` says what ("payload of job #5"), `slug` names its
    file."""

    name: str
    slug: str
    text: str


def clips_of(row: JobRow | DeadLetterRow) -> list[Clip]:
    """The id, the payload and (when there is one) the latest traceback of a row."""
    what = "job" if isinstance(row, JobRow) else "dead letter"
    tag = f"{'job' if isinstance(row, JobRow) else 'dead'}-{row.id}"
    out = [
        Clip(f"id of {what} #{row.id}", f"{tag}-id", str(row.id)),
        Clip(f"payload of {what} #{row.id}", f"{tag}-payload", payload_json(row.payload)),
    ]
    latest = max(row.errors, key=lambda e: e.attempt, default=None)
    if latest is not None and (latest.traceback or latest.error):
        trace = latest.traceback or latest.error
        out.append(
            Clip(
                f"traceback of attempt {latest.attempt} of {what} #{row.id}",
                f"{tag}-traceback",
                clean(trace.rstrip(), multiline=True),
            )
        )
    elif row.last_error:
        out.append(
            Clip(
                f"last error of {what} #{row.id}",
                f"{tag}-error",
                clean(row.last_error, multiline=True),
            )
        )
    return out


def osc52_blocked(env: dict[str, str] | None = None) -> str | None:
    """Why OSC 52 will not reach a clipboard here, when the environment says so; else None.

    Only what can be known without a reply: the terminal type, and tmux's own setting.
    """
    env = dict(os.environ) if env is None else env
    term = env.get("TERM", "")
    if term in ("", "dumb", "linux"):
        return f"TERM={term or 'unset'} has no clipboard"
    if env.get("TERM_PROGRAM") == "Apple_Terminal":
        return "macOS Terminal ignores OSC 52"
    if "TMUX" in env:
        setting = _tmux_set_clipboard(env)
        if setting == "off":
            return "tmux has set-clipboard off"
    elif term.startswith("screen") and "STY" in env:
        return "GNU screen does not pass OSC 52 on"
    return None


def _tmux_set_clipboard(env: dict[str, str]) -> str | None:
    tmux = shutil.which("tmux", path=env.get("PATH"))
    if tmux is None:
        return None
    try:
        done = subprocess.run(
            [tmux, "show-options", "-gv", "set-clipboard"],
            capture_output=True,
            text=True,
            timeout=2,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def file_name(clip: Clip) -> str:
    """A time-stamped file name for `clip`, safe on any file system."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', clip.slug)}-{stamp}.txt"


def save(clip: Clip, directory: Path | None = None) -> Path:
    """Write `clip` to a new private file in `directory` (jobtui's clipboard folder)."""
    folder = directory or state_dir() / "clipboard"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(clip)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(clip.text + "\n")
    return path


class Clipboard:
    """Sends or saves clips for one app; the notice it returns says exactly what was done."""

    def __init__(self, app: App[Any], directory: Path | None = None) -> None:
        self.app = app
        self.directory = directory

    def copy(self, clip: Clip, *, to_file: bool = False) -> str:
        """Send `clip` through OSC 52 (or save it, when asked or when OSC 52 cannot work)."""
        if self.app.is_web:  # a file would be on the server, out of the browser user's reach
            if to_file:
                name = file_name(clip)
                self.app.deliver_text(io.StringIO(clip.text + "\n"), save_filename=name)
                return f"Sent the {clip.name} to your browser as the download {name}"
            self.app.copy_to_clipboard(clip.text)
            return f"Sent the {clip.name} to the browser's clipboard. Not there? Y downloads it."
        if not to_file:
            blocked = osc52_blocked()
            if blocked is None:
                self.app.copy_to_clipboard(clip.text)
                return (
                    f"Sent the {clip.name} to the terminal clipboard (OSC 52; terminals do not "
                    "confirm). Not there? Y saves it to a file."
                )
            path = save(clip, self.directory)
            return f"Clipboard unavailable ({blocked}): saved the {clip.name} to {path}"
        path = save(clip, self.directory)
        return f"Saved the {clip.name} to {path}"
