"""tstat: statistics about text files, with subcommands (the oracle)."""

import argparse
import json
import re
import sys
from collections import Counter

WORD = re.compile(r"[^\W_]+")


class Failure(Exception):
    """Exit status 1 with ``tstat: MESSAGE`` on stderr."""


def bounded(low, high):
    def convert(text):
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}")
        return value
    return convert


def parse(argv):
    parser = argparse.ArgumentParser(prog="tstat", description="Statistics about text files.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    count = commands.add_parser("count", help="lines, words and characters")
    count.add_argument("files", nargs="*", metavar="FILE")
    only = count.add_mutually_exclusive_group()
    only.add_argument("--lines", action="store_true")
    only.add_argument("--words", action="store_true")
    only.add_argument("--chars", action="store_true")

    top = commands.add_parser("top", help="the most frequent words")
    top.add_argument("file", metavar="FILE")
    top.add_argument("-n", type=bounded(1, 100), default=10)
    top.add_argument("--ignore-case", action="store_true")
    top.add_argument("--min-length", type=bounded(1, 50), default=1)

    lines = commands.add_parser("lines", help="print the lines that match")
    lines.add_argument("file", metavar="FILE")
    lines.add_argument("--contains", default="")
    lines.add_argument("--longer-than", type=bounded(0, 10000), default=-1)
    lines.add_argument("--number", action="store_true")

    report = commands.add_parser("report", help="write a statistics report")
    report.add_argument("file", metavar="FILE")
    report.add_argument("--out", required=True)
    report.add_argument("--format", choices=["json", "text"], default="json")
    return parser.parse_args(argv)


def read(name):
    try:
        if name == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        with open(name, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        raise Failure(f"cannot read {name}") from None


def split_lines(text):
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts


def stats(text):
    return {"lines": len(split_lines(text)), "words": len(text.split()), "chars": len(text)}


def do_count(args):
    names = args.files or ["-"]
    rows = [(name, stats(read(name))) for name in names]
    if len(rows) > 1:
        rows.append(("total", {k: sum(r[1][k] for r in rows) for k in ("lines", "words", "chars")}))
    only = [k for k in ("lines", "words", "chars") if getattr(args, k)]
    for name, numbers in rows:
        shown = only or ["lines", "words", "chars"]
        print(" ".join(str(numbers[k]) for k in shown), name)


def do_top(args):
    words = WORD.findall(read(args.file))
    if args.ignore_case:
        words = [w.lower() for w in words]
    counts = Counter(w for w in words if len(w) >= args.min_length)
    for word, number in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: args.n]:
        print(number, word)


def do_lines(args):
    for number, line in enumerate(split_lines(read(args.file)), start=1):
        if args.contains in line and len(line) > args.longer_than:
            print(f"{number}:{line}" if args.number else line)


def do_report(args):
    text = read(args.file)
    lines = split_lines(text)
    numbers = {"file": args.file, **stats(text),
               "unique_words": len({w.lower() for w in WORD.findall(text)}),
               "longest_line": max((len(line) for line in lines), default=0)}
    if args.format == "json":
        body = json.dumps(numbers, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    else:
        order = ("file", "lines", "words", "chars", "unique_words", "longest_line")
        body = "".join(f"{key}: {numbers[key]}\n" for key in order)
    try:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(body)
    except OSError:
        raise Failure(f"cannot write {args.out}") from None
    print(f"wrote {args.out}")


def main(argv):
    args = parse(argv)
    try:
        {"count": do_count, "top": do_top, "lines": do_lines, "report": do_report}[args.command](args)
    except Failure as exc:
        print(f"tstat: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
