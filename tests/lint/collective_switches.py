#!/usr/bin/env python3
"""No `default:` in a switch over the collectives.

The list of collectives lives in one table (src/coll/collective.h); every
switch over it must name each collective, so that GCC's -Wswitch (an error
under -Werror) stops the build when one is added without its case. A
`default:` would hide that. This check finds switches whose cases name
a collective (`Collective::`, or the alias `Coll::`) and fails on any of them with a `default:` at its own level.

  collective_switches.py ROOT...   check the C and C++ sources under ROOTs
  collective_switches.py --self-test
"""
import pathlib
import re
import sys

SWITCH = re.compile(r"\bswitch\s*\(")
# A case naming a collective: coll::Collective::bcast, or through an alias
# (`using Coll = coll::Collective`).
COLLECTIVE_CASE = re.compile(r"\bcase\s+(?:[\w:]*::)?(?:Collective|Coll)::\w+\s*:")


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping offsets and newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def switch_bodies(code):
    """(offset, body) of every switch's block, nested ones included."""
    for m in SWITCH.finditer(code):
        depth, i = 0, m.end() - 1
        while i < len(code):  # the condition's parentheses
            depth += code[i] == "("
            depth -= code[i] == ")"
            i += 1
            if depth == 0:
                break
        start = code.find("{", i)
        if start < 0:
            continue
        depth, j = 0, start
        while j < len(code):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
            if depth == 0:
                break
        yield m.start(), code[start + 1 : j - 1]


def top_level(body):
    """The body without nested blocks' contents (their own switches count apart)."""
    out, depth = [], 0
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def offences(text):
    code = strip_comments_and_strings(text)
    for offset, body in switch_bodies(code):
        level = top_level(body)
        if COLLECTIVE_CASE.search(level) and re.search(r"\bdefault\s*:", level):
            yield code.count("\n", 0, offset) + 1


def self_test():
    bad = "void f(Collective c) { switch (c) { case Collective::bcast: break; default: break; } }"
    good = ("void f(Collective c, int k) { switch (c) { case Collective::bcast: "
            "{ switch (k) { default: break; } } break; } // default: \n}")
    assert list(offences(bad)) == [1], "a default over collectives must be found"
    alias = "void f(Coll c) { switch (c) {\n case Coll::bcast: break;\n default: break; } }"
    assert list(offences(alias)) == [1], "a default under an alias must be found"
    assert list(offences(good)) == [], "a nested switch's default or a comment is not one"
    print("self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    found = 0
    for root in argv[1:]:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if path.suffix not in (".c", ".cc", ".h", ".cpp", ".hpp"):
                continue
            for line in offences(path.read_text(errors="replace")):
                print(f"{path}:{line}: a switch over collectives has a default: name every "
                      "collective instead, so that -Wswitch finds one added later")
                found += 1
    if found == 0:
        print(f"no switch over collectives has a default ({', '.join(argv[1:])})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
