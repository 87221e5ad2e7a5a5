"""The merge by lines: fragments that do not parse alone (a hunk from inside a dict, a method's
body without its def), placed by their context lines as a diff hunk is; and where the place or
the extent is not certain, the model merges."""
from __future__ import annotations

import pytest

from rewriter.edits.snippets.merge import LINES, Merged, ToModel, merge_snippet

FILE = '''import json

SETTINGS = {
    "name": "demo",
    "retries": 3,
    "timeout": 10,
    "verbose": False,
}


class Client:
    def __init__(self, url):
        self.url = url
        self.session = None

    def fetch(self, path):
        response = self.session.get(self.url + path)
        if response.status != 200:
            raise ValueError(response.status)
        data = json.loads(response.text)
        return data

    def close(self):
        self.session = None


def main():
    client = Client("http://x")
    print(client.fetch("/"))
'''


def merged_by_lines(snippet: str, text: str = FILE) -> str:
    outcome = merge_snippet(text, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.path == LINES, outcome
    return outcome.text


def test_a_hunk_from_inside_a_dict_is_placed_by_its_context():
    snippet = '    "retries": 3,\n    "timeout": 30,\n    "verbose": False,\n}\n'
    assert merged_by_lines(snippet) == FILE.replace('"timeout": 10', '"timeout": 30')


def test_a_method_s_lines_without_its_indentation_take_the_file_s():
    # the common indentation taken off, the next method's header one level out: one shift for all
    snippet = ('    if response.status != 200:\n        raise ValueError(response.status)\n'
               '    data = json.loads(response.text)\n    return data.get("items", [])\n\n'
               'def close(self):\n    self.session = None\n')
    assert merged_by_lines(snippet) == FILE.replace("return data\n", 'return data.get("items", [])\n')


def test_markers_at_any_indentation_split_the_snippet_into_stretches():
    snippet = ('    def fetch(self, path):\n# ... existing code ...\n        data = json.loads(response.text)\n'
               '        return data["items"]\n\n    def close(self):\n        // ...\n')
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.text == FILE.replace("return data\n", 'return data["items"]\n')


def test_context_lines_the_snippet_repeats_are_not_written_twice():
    snippet = ("# ...\n    def close(self):\n        if self.session:\n            self.session.close()\n"
               "        self.session = None\n\n\ndef main():\n# ...\n")
    assert merged_by_lines(snippet) == FILE.replace(
        "    def close(self):\n", "    def close(self):\n        if self.session:\n            self.session.close()\n")


def test_a_crlf_file_keeps_its_newlines():
    crlf = FILE.replace("\n", "\r\n")
    snippet = '    "retries": 3,\n    "timeout": 30,\n    "verbose": False,\n}\n'
    assert merged_by_lines(snippet, crlf) == crlf.replace('"timeout": 10', '"timeout": 30')


def test_a_new_line_like_a_context_line_the_snippet_shows_is_new():
    # the new `if` repeats the context line after it: the snippet shows both, so both stay
    snippet = ("# ... existing code ...\n        response = self.session.get(self.url + path)\n"
               "        if response.status != 200:\n            response = self.session.get(self.url + path)\n"
               "        if response.status != 200:\n            raise ValueError(response.status)\n"
               "# ... existing code ...\n")
    assert merged_by_lines(snippet) == FILE.replace(
        "        if response.status != 200:\n            raise",
        "        if response.status != 200:\n            response = self.session.get(self.url + path)\n"
        "        if response.status != 200:\n            raise")


@pytest.mark.parametrize("snippet, words", [
    # a changed line alone (a hunk without context): where it goes, nothing says
    ('        return data["items"]\n', "replace"),
    # the anchors' indentation disagree: the new lines' cannot be trusted
    ('"retries": 3,\n"timeout": 30,\n    "verbose": False,\n}\n', "indented unlike"),
    # a new line the file holds right after the place: moved, or copied?
    ("        raise ValueError(response.status)\n        return data\n        data = json.loads(response.text)\n",
     "moved there"),
])
def test_what_the_lines_cannot_place_goes_to_the_model_saying_why(snippet, words):
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, ToModel) and words in outcome.reason.split("; by definitions")[0], outcome


def test_context_that_fits_two_places_goes_to_the_model():
    twice = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x\n"
    outcome = merge_snippet(twice, "# ...\n    x = 1\n    y = 2\n    return x\n# ...\n", "python")
    assert isinstance(outcome, ToModel) and "fit 2 places" in outcome.reason, outcome


def test_a_snippet_of_the_file_s_lines_with_markers_goes_to_the_model_the_whole_file_changes_nothing():
    # sent to change something, it changes nothing that can be seen: a line next to a marker may go
    snippet = "# ...\n        data = json.loads(response.text)\n        return data\n# ...\n"
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, ToModel) and "the snippet is the file's lines as they stand" in outcome.reason
    whole = merge_snippet(FILE, FILE + "\n", "python")
    assert isinstance(whole, Merged) and whole.text == FILE


def test_a_snippet_of_the_file_s_lines_that_skips_one_goes_to_the_model():
    # every line is the file's, but a blank line stands where the file has code: that code may go
    skips = "# ...\n        raise ValueError(response.status)\n\n# ...\n"
    outcome = merge_snippet(FILE, skips, "python")
    assert isinstance(outcome, ToModel) and "not the file's lines as they stand" in outcome.reason
    # at the file's start with no marker before it: the lines before it may go
    assert isinstance(merge_snippet(FILE, 'SETTINGS = {\n    "name": "demo",\n# ...\n', "python"), ToModel)
    from_start = merge_snippet(FILE, 'import json\n\nSETTINGS = {\n# ...\n', "python")
    assert isinstance(from_start, ToModel) and "the snippet is the file's lines as they stand" in from_start.reason


CHECKS = '''def check(client):
    client.connect()
    client.region = "one"
    client.call("a")
    client.verify("a")

    client.region = "one"
    client.call("b")
    client.verify("b")

    client.region = "one"
    client.call("c")
    client.verify("c")
    client.close()
'''


def test_a_line_the_file_holds_twice_where_it_goes_does_not_say_which_go():
    # two hunks with no marker between: the second one's first line is the file's line twice over
    # in the stretch it would replace, so which paragraphs go is unclear
    snippet = ('    client.connect()\n    client.region = "one"\n    client.call("A")\n\n'
               '    client.region = "one"\n    client.call("C")\n    client.verify("c")\n    client.close()\n')
    outcome = merge_snippet(CHECKS, snippet, "python")
    assert isinstance(outcome, ToModel) and "which one is unclear" in outcome.reason, outcome


MISINDENTED = "import os\n\n\ndef sizes(paths):\n      found = []\n  for path in paths:\n" \
              "      found.append(os.path.getsize(path))\nreturn found\n"
REINDENTED = "# ...\ndef sizes(paths):\n    found = []\n    for path in paths:\n" \
             "        found.append(os.path.getsize(path))\n    return found\n"


def test_the_file_s_lines_indented_otherwise_are_a_change_not_the_file_as_it_stands():
    outcome = merge_snippet(MISINDENTED, REINDENTED, "python", "Fix the indentation.")
    assert not (isinstance(outcome, Merged) and outcome.text == MISINDENTED), outcome
    # the same lines shifted as one (a method's lines without its class's indentation): the file's
    # lines as they stand, which change nothing that can be seen
    snippet = "# ...\n    data = json.loads(response.text)\n    return data\n# ...\n"
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, ToModel) and "the snippet is the file's lines as they stand" in outcome.reason


CHECKSUM = '''def sha1_file(data):
    checksum = sha1()
    chunk = data.read(SIZE)
    while chunk:
        checksum.update(chunk)
        chunk = data.read(SIZE)
    else:
        checksum.update(chunk)
    return checksum
'''


def test_a_context_line_the_hunk_dedents_is_changed_not_an_anchor():
    # the line after the removed `else:` matches the file's by its words, indented otherwise
    snippet = ("# ... existing code ...\n        checksum.update(chunk)\n        chunk = data.read(SIZE)\n"
               "    checksum.update(chunk)\n    return checksum\n")
    assert merged_by_lines(snippet, CHECKSUM) == CHECKSUM.replace(
        "    else:\n        checksum.update(chunk)\n", "    checksum.update(chunk)\n")


FOR_ELSE = '''def first_even(values):
    for value in values:
        if value % 2 == 0:
            return value
    else:
        return None


def last(values):
    return values[-1]
'''
NO_ELSE = ("# ... existing code ...\n        if value % 2 == 0:\n            return value\n    return None\n\n\n"
           "# ... existing code ...\n")


def test_a_lone_last_line_the_hunk_dedents_is_changed_where_the_file_holds_it_once():
    # the hunk's context after the change is blank lines, so its last code line, out of the removed
    # `else:`, matches the file's only by its words: a changed line, not an anchor
    assert merged_by_lines(NO_ELSE, FOR_ELSE) == FOR_ELSE.replace("    else:\n        return None\n",
                                                                  "    return None\n")


def test_a_lone_dedented_line_the_file_holds_twice_after_the_context_goes_to_the_model():
    # which `return None` the hunk ends at, and so how much of the file it replaces, is a guess
    text = FOR_ELSE.replace("def last(", "def first_odd(values):\n    for value in values:\n"
                            "        if value % 2:\n            return value\n    else:\n        return None\n\n\n"
                            "def last(")
    outcome = merge_snippet(text, NO_ELSE, "python")
    assert isinstance(outcome, ToModel) and "indented unlike the file's" in outcome.reason, outcome


def test_a_block_the_hunk_indents_into_a_new_one_is_not_taken_as_context():
    # the body moved into a `with` matches the file's by its words at another indentation in many
    # lines: two sides of two lines or more at two shifts say nothing sure about the indentation
    text = ("class Server:\n    def listen(self):\n        sock = open_socket()\n        sock.bind(PORT)\n"
            "        serve(sock)\n        sock.close()\n\n    def stop(self):\n        pass\n")
    snippet = ("# ... existing code ...\n    def listen(self):\n        with open_socket() as sock:\n"
               "            sock.bind(PORT)\n            serve(sock)\n\n# ... existing code ...\n")
    outcome = merge_snippet(text, snippet, "python")
    assert not (isinstance(outcome, Merged) and outcome.path == LINES), outcome


def test_a_fix_of_indentation_to_the_file_s_end_takes_the_context_before_it():
    assert merged_by_lines(REINDENTED, MISINDENTED) == "import os\n\n\n" + REINDENTED.removeprefix("# ...\n")


def test_a_snippet_without_markers_that_shares_no_line_with_the_file_is_the_whole_new_file():
    text = "def search(lst):\n    found = -1\n    for i in lst:\n        if i > found:\n            found = i\n" \
           "    return found\n"
    snippet = "def h_index(citations):\n    citations.sort(reverse=True)\n    h = 0\n" \
              "    for i, count in enumerate(citations):\n        if count > i:\n            h = i + 1\n    return h\n"
    outcome = merge_snippet(text, snippet, "python", "Compute the h-index instead. Rename the function to h_index.")
    assert isinstance(outcome, Merged) and outcome.path == LINES and outcome.text == snippet, outcome
    # the same snippet beside code it does not name would lose that code: the model's turn
    outcome = merge_snippet(text + "\n\ndef mean(lst):\n    return sum(lst) / len(lst)\n", snippet, "python",
                            "Compute the h-index instead. Rename the function to h_index.")
    assert isinstance(outcome, ToModel), outcome


KIND = '''def kind(a, b, c):
    if a == b == c:
        return "equal"
    elif a > b + c:
        return "flat"
    else:
        return "odd"
'''
SWAPPED = ('    if a == b == c:\n        return "equal"\n    elif a >= b + c:\n        return "odd"\n    else:\n'
           '        return "flat"\n')


def test_a_last_stretch_without_a_marker_after_runs_to_the_file_s_end_where_its_end_fits_nothing_sure():
    # its last lines match the file's middle, where a new line would be a copy of the next one:
    # read literally (no marker after it), the stretch replaces the file's last lines
    assert merged_by_lines("# ... existing code ...\n" + SWAPPED, KIND) == KIND.split("    if")[0] + SWAPPED
    # with a marker after it, the snippet says code follows: the model merges
    outcome = merge_snippet(KIND, "# ... existing code ...\n" + SWAPPED + "# ... existing code ...\n", "python")
    assert isinstance(outcome, ToModel) and "moved there, or a copy of it" in outcome.reason, outcome


UNWRAP = '''def check(client, url):
    url = str(url)
    if True:
        response = client.get(url)
        assert response.ok
    response = client.get(url, user="foo")
    if response.status != 403:
        raise Exception(
            "status %s" % (
                response.status))

    response = client.get(url, user="bar")
    if True:
        rows = response.rows
        assert rows
    return response
'''


def test_a_bare_snippet_that_dedents_two_blocks_keeps_the_lines_between_its_hunks():
    # no markers: the blank line between the hunks stands for the file's lines there, which stay
    snippet = ('    url = str(url)\n    response = client.get(url)\n    assert response.ok\n'
               '    response = client.get(url, user="foo")\n\n'
               '    response = client.get(url, user="bar")\n    rows = response.rows\n    assert rows\n'
               '    return response\n')
    expected = UNWRAP.replace("    if True:\n", "").replace("        response = client.get(url)\n        assert",
                                                             "    response = client.get(url)\n    assert")
    expected = expected.replace("        rows = response.rows\n        assert rows", "    rows = response.rows\n    assert rows")
    assert merged_by_lines(snippet, UNWRAP) == expected


IMPORTS = "import os\nimport sys\nimport json\nimport re\nimport glob\n\nfrom pathlib import Path\nimport shutil\n\n" \
          "\ndef copy(a, b):\n    shutil.copy(Path(a), b)\n"


def test_a_bare_snippet_s_blank_line_for_lines_the_instruction_removes_goes_to_the_model():
    # the blank line after `import os` may be the gap between two hunks or the four imports
    # there removed, and the instruction names two of them
    snippet = "import os\n\nfrom pathlib import Path\nimport shutil\n\n\ndef copy(a, b):\n"
    outcome = merge_snippet(IMPORTS, snippet, "python", "Remove the unused imports: import sys, import json")
    assert isinstance(outcome, ToModel) and "instruction asks to remove" in outcome.reason


@pytest.mark.parametrize("text, snippet, change, unnamed, named", [
    # `]` closes the list before the hunk; the instruction's brackets do not ask to remove it
    ("NAMES = [\n    'a',\n]\n\n\ndef show():\n    print(NAMES)\n    return None\n",
     "def show():\n    print(NAMES, sep=', ')\n    return None\n", ("print(NAMES)", "print(NAMES, sep=', ')"),
     "Remove the sep default [see notes]", "Remove the line 'a', from the list"),
    # `import os.chdir` names another import than `import os`: the lines before the hunk stay
    ("import os\nimport sys\n\n\ndef run():\n    os.chdir('/')\n    return sys.argv\n",
     "def run():\n    os.chdir('/tmp')\n    return sys.argv\n", ("'/'", "'/tmp'"),
     "[-] import os.chdir\n[-] remove the root", "[-] import os\n[-] remove the root"),
])
def test_a_line_is_named_by_the_instruction_only_whole_and_with_a_word(text, snippet, change, unnamed, named):
    outcome = merge_snippet(text, snippet, "python", unnamed)
    assert isinstance(outcome, Merged) and outcome.text == text.replace(*change)
    asked = merge_snippet(text, snippet, "python", named)
    assert isinstance(asked, ToModel) and "asks to remove a line before it" in asked.reason


# Context that fits several places: the place is sure where the lines the hunk replaces there are
# clearly the most like its own (an edited line keeps most of its words), and only then.
SAME_CONTEXT = '''class Cart:
    def total(self):
        for item in self.items:
            total += item.price * item.quantity
        return total

    def prune(self):
        for item in self.items:
            if item.expired():
                self.items.remove(item)
        return total

    def show(self):
        for item in self.items:
            print(item.name)
        return total
'''


def test_context_that_fits_several_places_goes_where_the_replaced_lines_are_most_alike():
    snippet = ("# ... existing code ...\n        for item in self.items:\n"
               "            total += item.price * item.quantity * (1 - item.discount)\n        return total\n"
               "# ... existing code ...\n")
    outcome = merge_snippet(SAME_CONTEXT, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.path == LINES, outcome
    assert outcome.text == SAME_CONTEXT.replace("item.quantity\n", "item.quantity * (1 - item.discount)\n")


@pytest.mark.parametrize("new_lines", [
    "            print(item.name, item.price)\n",  # the same lines in two places: which one, nothing says
    "            log.debug(item)\n",  # alike nothing there
])
def test_context_that_fits_several_places_without_one_clearly_most_alike_goes_to_the_model(new_lines):
    twice = SAME_CONTEXT.replace("def show", "def show_again") + SAME_CONTEXT.replace("class Cart", "class Box")
    snippet = f"# ... existing code ...\n        for item in self.items:\n{new_lines}        return total\n# ...\n"
    outcome = merge_snippet(twice if "name," in new_lines else SAME_CONTEXT, snippet, "python")
    assert isinstance(outcome, ToModel) and "places" in outcome.reason.split("; by definitions")[0], outcome


FALLBACK = '''def find(dirs, name):
    for folder in dirs:
        path = folder + name
        if exists(path):
            return path
    else:
        path = HOME + name
        if exists(path):
            return path
    return None
'''


def test_context_that_fits_several_places_goes_where_far_more_of_the_snippet_is_the_file_s():
    # the first `if exists` starts a place where all but the `else:` is the file's; the second
    # only where its copies would be inserted
    snippet = ("# ... existing code ...\n        if exists(path):\n            return path\n"
               "    path = HOME + name\n    if exists(path):\n        return path\n    return None\n")
    assert merged_by_lines(snippet, FALLBACK) == FALLBACK.replace(
        "    else:\n        path = HOME + name\n        if exists(path):\n            return path\n",
        "    path = HOME + name\n    if exists(path):\n        return path\n")


LONG = '''import json
import sys

LIMIT = 10
NAME = "report"


def report(rows, out=[]):
    out.append("header")
    for row in rows:
        out.append(row.name)
        out.append(row.value)
    out.append("total")
    out.append(str(len(rows)))
    return out
'''


def test_a_bare_hunk_that_ends_inside_a_function_goes_to_the_model():
    # the hunk's last lines are the function's first: the rest of it removed, or kept? Nothing tells
    snippet = 'def report(rows, out=None):\n    out = out or []\n    out.append("header")\n    for row in rows:\n'
    outcome = merge_snippet(LONG, snippet, "python")
    assert isinstance(outcome, ToModel) and "ends inside function report" in outcome.reason, outcome
    # a whole function that ends as the file's does replaces it
    whole = 'def report(rows, out=None):\n    out = out or []\n    out.append("header")\n    return out\n'
    shorter = merge_snippet(LONG, whole, "python")
    assert isinstance(shorter, Merged) and shorter.text == LONG[:LONG.index("def")] + whole


# A selection that starts at the code, not at the line's start: the first line without its indentation.
MID_LINE = '''response = self.session.get(self.url + path)
        if response.status not in (200, 204):
            raise ValueError(response.status)
        data = json.loads(response.text)
'''


@pytest.mark.parametrize("marker", ["", "# ... existing code ...\n"])
def test_a_snippet_copied_from_the_middle_of_its_first_line_merges_as_the_whole_line(marker):
    whole = merge_snippet(FILE, marker + "        " + MID_LINE + marker, "python")
    outcome = merge_snippet(FILE, marker + MID_LINE + marker, "python")
    assert isinstance(outcome, Merged) and outcome.path == LINES
    assert isinstance(whole, Merged) and outcome.text == whole.text
    assert "        if response.status not in (200, 204):\n" in outcome.text


def test_the_first_line_s_indentation_comes_from_later_lines_where_the_next_one_changed():
    snippet = '''response = self.session.get(self.url + path)
        if response.status >= 400:
            raise ValueError(response.status)
        data = json.loads(response.text)
'''
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, Merged)
    assert outcome.text == FILE.replace("status != 200", "status >= 400")


def test_a_first_line_held_once_takes_the_file_s_indentation_where_no_later_line_is_the_file_s():
    # every line after the first is new (to the file's end): the first alone tells where the selection began
    new = '    client.session = object()\n    print(client.fetch("/health"))\n'
    outcome = merge_snippet(FILE, '# ... existing code ...\nclient = Client("http://x")\n' + new, "python")
    assert isinstance(outcome, Merged), outcome
    assert outcome.text == FILE.replace('    print(client.fetch("/"))\n', new)
    # lines deeper than a first line that opens no block: the guess does not parse, so no merge
    deeper = '# ... existing code ...\nclient = Client("http://x")\n' + new.replace("    ", "        ")
    assert not isinstance(merge_snippet(FILE, deeper, "python"), Merged)


def test_a_first_line_the_later_lines_do_not_agree_on_stays_as_written():
    # `return lst` stands inside the new `if` (8 columns) and at the body's end (4), the file's
    # `lst[i], ...` at 8: the later lines do not tell one indentation, and the def is the file's own.
    file = "def swap(lst):\n    for i in range(0, len(lst), 2):\n        lst[i], lst[i+1] = lst[i+1], lst[i]\n" \
           "    return lst\n"
    snippet = "def swap(lst):\n    if len(lst) < 2:\n        return lst\n    for i in range(0, len(lst) - 1, 2):\n" \
              "        lst[i], lst[i+1] = lst[i+1], lst[i]\n    return lst\n"
    outcome = merge_snippet(file, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.text == snippet


def test_a_first_line_that_opens_a_brace_lets_the_new_lines_after_it_stand_deeper():
    # JavaScript: the selection starts at `if`'s code, and the file holds none of the later lines at
    # one indentation only, so the `{` alone tells that the deeper lines are its block, as `:` does
    file = "function check(user) {\n  if (user.age < 18) {\n    return false;\n  }\n  return true;\n}\n"
    new = '    log(user);\n    throw new Error("minor");\n'
    outcome = merge_snippet(file, "// ...\nif (user.age < 18) {\n" + new + "  }\n// ...\n", "javascript")
    assert isinstance(outcome, Merged), outcome
    assert outcome.text == file.replace("    return false;\n", new)


# Two classes with the same methods: a hunk's context fits both.
def _twin(name: str) -> str:
    return (f'class {name}:\n    """The {name.lower()}."""\n\n    def size(self):\n        count = len(self.items)\n'
            '        return count\n\n    def empty(self):\n        return not self.items\n\n    def label(self):\n'
            f'        return "{name.lower()}"\n')


TWINS = _twin("First") + "\n\n" + _twin("Second")
SIZE_HUNK = '''# ... existing code ...
    def size(self):
        count = len(self.items)
        return count + 1

    def empty(self):
# ... existing code ...
'''


def test_a_hunk_that_fits_two_places_goes_to_the_one_the_later_hunks_follow():
    # only after First's size does the label hunk, which ends before `class Second:`, have a place
    snippet = SIZE_HUNK + '    def label(self):\n        return "First"\n\n\nclass Second:\n# ... existing code ...\n'
    outcome = merge_snippet(TWINS, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.path == LINES
    assert outcome.text == TWINS.replace("return count\n", "return count + 1\n", 1).replace('"first"', '"First"')


def test_a_hunk_that_fits_two_places_the_later_hunks_follow_both_goes_to_the_model():
    # the label hunk runs to the file's end, after either copy of size: which one changes is unclear
    snippet = SIZE_HUNK + '    def label(self):\n        return "Second"\n'
    outcome = merge_snippet(TWINS, snippet, "python")
    assert isinstance(outcome, ToModel) and "fit 2 places" in outcome.reason


def test_a_hunk_that_fits_two_places_goes_where_its_context_stands_at_the_snippet_s_indentation():
    # in Second, `count = ...` stands one level deeper than beside First's `def empty`: the
    # snippet's context lines do not fit there at one indentation, so First's is the place
    guarded = TWINS.replace("        count = len(self.items)\n        return count\n\n    def empty(self):\n        "
                            "return not self.items\n\n    def label(self):\n        return \"second\"",
                            "        if self.items:\n            count = len(self.items)\n        return count\n\n"
                            "    def empty(self):\n        return not self.items\n\n    def label(self):\n"
                            "        return \"second\"")
    assert guarded.count("            count = len(self.items)\n") == 1
    snippet = "# ... existing code ...\n        count = len(self.items)\n        return count + 1\n\n" \
              "    def empty(self):\n# ... existing code ...\n"
    outcome = merge_snippet(guarded, snippet, "python")
    assert isinstance(outcome, Merged), outcome
    assert outcome.text == guarded.replace("return count\n", "return count + 1\n", 1)


def test_a_snippet_of_a_thousand_hunks_merges_without_running_out_of_stack():
    file = "".join(f"a{i} = 0\nb{i} = 1\nc{i} = 2\n" for i in range(1000))
    snippet = "# ... existing code ...\n" + "".join(f"a{i} = 0\nb{i} = 10\nc{i} = 2\n# ... existing code ...\n"
                                                    for i in range(1000))
    outcome = merge_snippet(file, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.path == LINES
    assert outcome.text == file.replace(" = 1\n", " = 10\n")
