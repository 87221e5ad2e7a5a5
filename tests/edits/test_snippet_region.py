"""The region a snippet the model merges goes in: the model rewrites it alone, so it must hold
every place the snippet's lines come from, and the whole file where that cannot be told."""
from __future__ import annotations

from rewriter.edits.snippets.region import snippet_region

FILE = '''import json


def load(path):
    with open(path) as handle:
        data = json.load(handle)
    return data


def save(path, data):
    with open(path, "w") as handle:
        json.dump(data, handle)
    return path


def main():
    save("b.json", load("a.json"))
'''


def region_text(snippet: str, text: str = FILE) -> str:
    return snippet_region(text, snippet, "python").code


def test_a_hunk_inside_one_function_is_merged_into_that_function():
    snippet = ('# ... existing code ...\n    with open(path, "w") as handle:\n'
               '        json.dump(data, handle, indent=2)\n    return path\n# ... existing code ...\n')
    assert region_text(snippet) == FILE[FILE.index("def save"):FILE.index("\n\n\ndef main")] + "\n"


def test_hunks_in_two_functions_take_both_and_what_lies_between():
    snippet = ("# ... existing code ...\n        data = json.load(handle)\n    return dict(data)\n"
               "# ... existing code ...\n        json.dump(data, handle, indent=2)\n    return path\n# ... existing code ...\n")
    region = region_text(snippet)
    assert region.startswith("def load") and region.rstrip().endswith("return path")


def test_new_code_at_an_end_of_the_snippet_may_go_anywhere_so_the_whole_file():
    snippet = "# ... existing code ...\n    return path\n\n\ndef remove(path):\n    os.remove(path)\n"
    assert region_text(snippet) == FILE


def test_a_file_that_does_not_parse_is_merged_whole():
    broken = FILE.replace("def main():", "def main(:")
    assert region_text("    return path\n", broken) == broken


def test_a_line_found_in_several_places_widens_the_region_to_all_of_them():
    # `return data` ends load; it stands for its first place, `return path` for its last
    snippet = "# ...\n    return data\n# ... existing code ...\n    return path\n# ...\n"
    region = region_text(snippet)
    assert region.startswith("def load") and "def save" in region and "def main" not in region


def test_a_snippet_with_markers_but_none_at_its_start_reaches_the_file_s_start():
    # a hunk that removed the import shows only the lines after it: the import is the model's to remove
    snippet = "def load(path):\n    with open(path) as handle:\n# ... existing code ...\n"
    assert region_text(snippet).startswith("import json\n")
    assert region_text("# ...\n" + snippet).startswith("def load")
