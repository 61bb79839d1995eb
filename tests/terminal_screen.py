"""A tiny terminal for tests: replays what a program wrote (text, carriage returns, new
lines, and the cursor-up and clear-line sequences rich's live view redraws with) and
returns the lines left on the screen, so a test can see what a user would."""

from __future__ import annotations

import re

# CSI sequences: ESC [ params letter (colours, cursor moves, clears, cursor shown/hidden).
_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(written: str) -> list[str]:
    """The lines on the screen once ``written`` is replayed (trailing blanks dropped)."""
    lines: list[list[str]] = [[]]
    row = col = 0
    at = 0
    while at < len(written):
        csi = _CSI.match(written, at)
        if csi is not None:
            params, letter = csi.groups()
            count = int(params) if params.isdigit() else 1
            if letter == "A":  # cursor up
                row = max(0, row - count)
            elif letter == "K":  # clear the line (rich clears whole lines: 2K)
                lines[row] = []
            elif letter == "G":  # cursor to a column (1-based)
                col = count - 1
            at = csi.end()
            continue
        char = written[at]
        at += 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
        elif char >= " ":
            line = lines[row]
            line.extend(" " * (col - len(line) + 1))
            line[col] = char
            col += 1
    text = ["".join(line).rstrip() for line in lines]
    while text and not text[-1]:
        text.pop()
    return text
