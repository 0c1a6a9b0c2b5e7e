"""Slang Playground programs in a notebook: a cell that `import playground;` and marks its globals and
entry points with `[playground::...]` attributes runs as the Playground runs it.

program.py: PlaygroundProgram (resources, inputs, the per-frame dispatch); attributes.py: the table of
attribute handlers (what the Playground has and where each is served); resources.py, values.py: how
resources and live inputs are made; text.py: links and printing; robust.py: WebGPU's index clamping.
"""

from .program import (PLAYGROUND_URL, Input, PlaygroundError, PlaygroundProgram, Resource, decode_playground_link,
                      decode_prints, dispatch, is_playground, last_good_message, playground_link, program_for,
                      string_hash, to_rgba8)

__all__ = [
    "PLAYGROUND_URL", "Input", "PlaygroundError", "PlaygroundProgram", "Resource", "decode_playground_link",
    "decode_prints", "dispatch", "is_playground", "last_good_message", "playground_link", "program_for",
    "string_hash", "to_rgba8",
]
