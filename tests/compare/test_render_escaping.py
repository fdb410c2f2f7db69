"""Table cells are escaped before the columns are measured, so a hostile graph name neither
reaches the terminal raw nor pushes its row out of line."""

from hipdnn_trace.compare.render import _aligned


def test_hostile_cells_are_escaped_before_alignment():
    lines = _aligned(["graph", "verdict"], [["a\x1b[31mb\nc", "SAME"], ["plain", "SLOWER"]])
    assert all("\x1b" not in line and "\n" not in line for line in lines)
    assert lines[2].startswith("a\\x1b[31mb\\nc")
    assert lines[2].index("SAME") == lines[3].index("SLOWER") == lines[0].index("verdict")
