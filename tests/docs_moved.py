#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Nothing lost in a move of the documentation: every paragraph of an old
README.md (blank-line separated, code blocks included) must be found in
README.md or docs/*.md, up to links (`[text](url)` counts as its text),
double quotes, heading marks and white space. Run by hand when pages
move, against the README before the move:

    python3 tests/docs_moved.py <(git show REV:README.md) [SOURCE_DIR]

Prints each paragraph not found, with the closest paragraph of the pages,
and exits 1 if there is one; a reference that was pointed at another page
on purpose ("see X below" become a link) shows up here, to be read."""
import difflib
import glob
import os
import re
import sys


def norm(text):
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", text)
    text = re.sub(r"(?m)^\s*#+\s+", "", text)
    text = text.replace('"', "")
    return " ".join(text.split())


def paragraphs(text):
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    old = open(sys.argv[1], encoding="utf-8").read()
    pages = [os.path.join(src, "README.md")] + sorted(
        glob.glob(os.path.join(src, "docs", "*.md")))
    new_paras = []
    for p in pages:
        new_paras += paragraphs(open(p, encoding="utf-8").read())
    whole = norm("\n\n".join(new_paras))
    normed = [norm(p) for p in new_paras]
    lost = 0
    olds = paragraphs(old)
    for p in olds:
        n = norm(p)
        if n and n not in whole:
            lost += 1
            near = difflib.get_close_matches(n, normed, n=1, cutoff=0.3)
            print("not found:\n  " + p.replace("\n", "\n  "))
            if near:
                print("closest:\n  " + near[0])
            print()
    print(f"{len(olds) - lost} of {len(olds)} paragraphs found")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
