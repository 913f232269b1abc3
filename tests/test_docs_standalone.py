#!/usr/bin/env python3
"""The tree's text reads on its own, in TAP. Three cases:

  tracker    no comment or doc cites a work-tracker entry by number (the
             word "issue" or "session" followed by a number): a reader of a
             clone cannot look those up, so a comment says why, or names the
             docs section that holds the measurement. Lines that point at
             another project's tracker (a github.com address, or
             owner/repo#N such as jax-ml/jax#23181) are real public
             references and stay.
  links      no .md file links or points outside the repository: a relative
             link must resolve to a file of the tree, and a `../` path may
             not leave the directory the tree is in.
  headings   every heading quoted after a doc's name (docs/lowering.md,
             "Long kernels") is a heading (or a bold lead-in, or a table's
             first cell) of that doc, a prefix of one allowed; every
             FILE.md#anchor names one of FILE.md's headings.

    test_docs_standalone.py [ROOT]   (default $TSR_SOURCE_ROOT)

The files are git's (tracked and untracked, not ignored) when ROOT is a
git checkout, else every file under ROOT outside build directories. Each
failure is printed as FILE:LINE: TEXT.
"""
import os
import re
import subprocess
import sys

TRACKER = re.compile(r"\b(?:issues?|sessions?)[ -]?#?[0-9]+", re.IGNORECASE)
# Another project's tracker: github.com/..., or owner/repo#N.
PUBLIC_TRACKER = re.compile(r"github\.com|\b[\w.-]+/[\w.-]+#[0-9]+")

SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".pytest_cache"}
SKIP_SUFFIXES = (".npy", ".npz", ".png", ".jpg", ".gz", ".zst", ".so", ".o", ".a", ".pyc")


def list_files(root):
    """Paths relative to root of the files to read."""
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(
                ["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                 "--exclude-standard"], capture_output=True, check=True).stdout
            return sorted({p for p in out.decode().split("\0") if p})
        except (OSError, subprocess.CalledProcessError):
            pass
    paths = []
    for d, dirs, files in os.walk(root):
        # A build directory (meson's) is not source.
        if "meson-private" in dirs or "build.ninja" in files:
            dirs[:] = []
            continue
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        paths += [os.path.relpath(os.path.join(d, f), root) for f in sorted(files)]
    return paths


def read_text(root, rel):
    if rel.endswith(SKIP_SUFFIXES):
        return None
    try:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
    except OSError:  # listed by git but deleted, a dangling link...
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check_tracker(texts):
    bad = []
    for rel, text in texts.items():
        for n, line in enumerate(text.splitlines(), 1):
            if TRACKER.search(line) and not PUBLIC_TRACKER.search(line):
                bad.append("%s:%d: %s" % (rel, n, line.strip()))
    return bad


MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
UP_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w./-]*)")


def inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def check_links(root, texts):
    bad = []
    for rel, text in texts.items():
        if not rel.endswith(".md"):
            continue
        here = os.path.dirname(os.path.join(root, rel))
        links = set()
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # https:, mailto:, an anchor of this page
            links.add(m.start(1))
            path = os.path.normpath(os.path.join(here, target.split("#")[0]))
            if not inside(root, path):
                bad.append("%s:%d: link leaves the repository: %s"
                           % (rel, line_of(text, m.start()), target))
            elif not os.path.exists(path):
                bad.append("%s:%d: link to a file the tree does not have: %s"
                           % (rel, line_of(text, m.start()), target))
        for m in UP_PATH.finditer(text):
            if m.start(1) in links:
                continue  # reported as a link
            target = m.group(1)
            path = os.path.normpath(os.path.join(here, target))
            if not inside(root, path) or not os.path.exists(path):
                bad.append("%s:%d: path outside the repository: %s"
                           % (rel, line_of(text, m.start()), target))
    return bad


HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")
BOLD_LEAD = re.compile(r"\s*(?:[-*+]|[0-9]+\.)?\s*\*\*(.+?)\*\*")
TABLE_CELL = re.compile(r"\|\s*([^|]+?)\s*\|")
# A doc's name, then (after a comma, a space or an opening parenthesis) a
# quoted heading, which may run over lines of a comment.
QUOTED = re.compile(r"([\w./-]+\.md)(?:\)?,[ \t]*(?:\n[ \t]*(?:\*|//|#)?[ \t]*)?"
                    r"|[ \t]+|[ \t]*\([ \t]*)\"([^\"]{1,300})\"")
ANCHOR = re.compile(r"\]\(([\w./-]*\.md)?#([\w-]+)\)")


def plain(s):
    return re.sub(r"\s+", " ", s.replace("`", "").replace("**", "")).strip()


def slug(heading):
    """GitHub's anchor for a heading."""
    s = plain(heading).lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def doc_titles(text):
    headings, titles = [], []
    for line in text.splitlines():
        m = HEADING.match(line)
        if m:
            headings.append(m.group(1))
            titles.append(plain(m.group(1)))
            continue
        for r in (BOLD_LEAD, TABLE_CELL):
            m = r.match(line)
            if m:
                titles.append(plain(m.group(1)))
    return headings, titles


def check_headings(texts):
    docs = {rel: doc_titles(text) for rel, text in texts.items() if rel.endswith(".md")}

    def find(rel, name):
        """The docs `name` (as written in `rel`) may mean."""
        name = re.sub(r"^(\.\.?/)+", "", name)
        near = os.path.normpath(os.path.join(os.path.dirname(rel), name))
        if near in docs:
            return [near]
        return [d for d in docs if d == name or d.endswith("/" + name)]

    bad = []
    count = 0
    for rel, text in texts.items():
        for m in QUOTED.finditer(text):
            targets = find(rel, m.group(1))
            if not targets:
                continue  # not a doc of this tree
            count += 1
            # A quote over lines of a comment: drop the comment markers.
            q = plain(re.sub(r"\n\s*(?:\*|//|#)?\s*", " ", m.group(2)))
            if not any(t == q or t.startswith(q) for d in targets for t in docs[d][1]):
                bad.append("%s:%d: %s has no heading \"%s\""
                           % (rel, line_of(text, m.start()), m.group(1), q))
        if rel.endswith(".md"):
            for m in ANCHOR.finditer(text):
                targets = find(rel, m.group(1)) if m.group(1) else [rel]
                count += bool(targets)
                if targets and not any(m.group(2) in {slug(h) for h in docs[d][0]}
                                       for d in targets):
                    bad.append("%s:%d: no heading for the anchor %s#%s"
                               % (rel, line_of(text, m.start()), m.group(1) or "", m.group(2)))
    return bad, count


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TSR_SOURCE_ROOT")
    if not root:
        print("1..0 # SKIP needs $TSR_SOURCE_ROOT or a directory")
        return 0
    texts = {}
    for rel in list_files(root):
        text = read_text(root, rel)
        if text is not None:
            texts[rel] = text
    heading_bad, heading_count = check_headings(texts)
    cases = [
        ("no work-tracker numbers in %d files" % len(texts), check_tracker(texts)),
        ("no .md file links or points outside the repository", check_links(root, texts)),
        ("the %d quoted doc headings and anchors exist" % heading_count, heading_bad),
    ]
    print("1..%d" % len(cases))
    failed = 0
    for i, (desc, bad) in enumerate(cases, 1):
        failed += bool(bad)
        print("%s %d - %s" % ("not ok" if bad else "ok", i, desc))
        for b in bad:
            print("#   " + b)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
