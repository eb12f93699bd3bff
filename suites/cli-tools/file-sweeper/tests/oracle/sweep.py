"""sweep: delete old files from a folder, filtered by age, extension and size (the oracle)."""

import argparse
import os
import sys
import time


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def parse(argv):
    parser = argparse.ArgumentParser(prog="sweep", description="Delete old files from a folder.")
    parser.add_argument("folder")
    parser.add_argument("--older-than", type=non_negative, required=True, metavar="DAYS")
    parser.add_argument("--ext")
    parser.add_argument("--min-size", type=non_negative, metavar="BYTES")
    parser.add_argument("--recursive", action="store_true")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--dry-run", action="store_true")
    output.add_argument("--quiet", action="store_true")
    return parser.parse_args(argv)


def candidates(folder, recursive):
    for entry in sorted(os.listdir(folder)):
        if entry.startswith("."):
            continue
        path = os.path.join(folder, entry)
        if os.path.islink(path):
            continue
        if os.path.isdir(path):
            if recursive:
                yield from candidates(path, recursive)
        elif os.path.isfile(path):
            yield path


def main(argv):
    args = parse(argv)
    if args.older_than > 3650:
        print("sweep: --older-than must be at most 3650", file=sys.stderr)
        return 2
    if not os.path.isdir(args.folder):
        print(f"sweep: no such folder: {args.folder}", file=sys.stderr)
        return 1
    ext = None if args.ext is None else "." + args.ext.lstrip(".")
    cutoff = time.time() - args.older_than * 86400
    matched = []
    for path in candidates(args.folder, args.recursive):
        info = os.stat(path)
        if info.st_mtime >= cutoff:
            continue
        if ext is not None and not path.endswith(ext):
            continue
        if args.min_size is not None and info.st_size < args.min_size:
            continue
        matched.append((path, info.st_size))
    verb = "would delete" if args.dry_run else "deleted"
    for path, _ in matched:
        if not args.dry_run:
            os.remove(path)
        if not args.quiet:
            print(f"{verb} {path}")
    total = sum(size for _, size in matched)
    print(f"{verb} {len(matched)} files ({total} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
