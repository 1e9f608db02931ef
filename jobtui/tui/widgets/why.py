"""The answer to "why isn't this job running?" (jobtui.why) as a block of the job's detail.

The screen that mounts it reads the answer through its link and hands it over:

    answer = await link.run(why.explain, job_id)
    self.query_one(WhyView).show(answer)

Reasons that keep the job from running are highlighted; the rest (its place in line) are not.
Everything from the database is shown inert.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from jobtui.inert import inert
from jobtui.tui.palette import cell_styles
from jobtui.tui.texts import same
from jobtui.why import WhyAnswer


def why_text(answer: WhyAnswer | None, *, warning: str = "", success: str = "") -> Text:
    """The answer as lines: the state, then one line per reason."""
    if answer is None:
        return Text("no such job (it may have been pruned)")
    lines: list[Text | str] = [Text(f"{answer.state}", style="bold")]
    for reason in answer.reasons:
        style = warning if reason.blocking else success
        lines += ["\n", Text("• ", style=style), inert(reason.text, style=style)]
    return Text.assemble(*lines)


class WhyView(Static):
    """A Static showing a WhyAnswer; redrawn only when the text changes."""

    def show(self, answer: WhyAnswer | None) -> None:
        st = cell_styles(self.app)
        text = why_text(answer, warning=st.warning, success=st.success)
        if not same(self.content, text):
            self.update(text)
