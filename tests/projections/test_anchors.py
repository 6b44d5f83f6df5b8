"""Section anchors are a pure function of the text: deterministic, unique, and blind to
trailing white space and line-end style, while the body digest sees every byte."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from lessonledger.projections.anchors import WHOLE_BODY, anchors, body_digest

_line = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"),
            max_size=30),
    st.builds(lambda level, title: "#" * level + " " + title, st.integers(1, 7),
              st.text(alphabet="abc XYZ-_!é", max_size=12)),
    st.sampled_from(["```", "~~~", "", "   ## Indented", "#NoSpace"]),
)
_text = st.lists(_line, max_size=20).map("\n".join)


@given(_text)
@example("")
@example("# A\n# A\n# a!\n")
def test_anchors_are_deterministic_unique_and_ignore_trailing_space(text: str) -> None:
    found = anchors(text)
    assert anchors(text) == found
    slugs = [a.slug for a in found]
    assert len(set(slugs)) == len(slugs)
    assert all(slugs)
    assert (slugs == [WHOLE_BODY]) or WHOLE_BODY not in slugs
    padded = "\r\n".join(line + "  " for line in text.split("\n"))
    assert anchors(padded) == found
    if padded != text:
        assert body_digest(padded) != body_digest(text)
