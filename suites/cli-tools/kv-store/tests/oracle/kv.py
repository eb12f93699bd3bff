"""kv: a key-value store kept in a JSON file (the oracle)."""

import argparse
import json
import os
import re
import sys

DEFAULT_STORE = "kv.json"


class Failure(Exception):
    """A command that cannot be done: message on stderr, exit status 1."""


def parse(argv):
    parser = argparse.ArgumentParser(prog="kv", description="A key-value store in a JSON file.")
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="FILE")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    put = commands.add_parser("set", help="set KEY to VALUE")
    put.add_argument("key")
    put.add_argument("value")
    put.add_argument("--if-absent", action="store_true")

    get = commands.add_parser("get", help="print the value of KEY")
    get.add_argument("key")
    get.add_argument("--default")

    delete = commands.add_parser("delete", help="remove KEY")
    delete.add_argument("key")

    listing = commands.add_parser("list", help="list the keys")
    listing.add_argument("--prefix", default="")
    form = listing.add_mutually_exclusive_group()
    form.add_argument("--values", action="store_true")
    form.add_argument("--json", action="store_true")

    incr = commands.add_parser("incr", help="add to an integer value")
    incr.add_argument("key")
    incr.add_argument("--by", type=int, default=1)

    count = commands.add_parser("count", help="print the number of keys")
    count.add_argument("--prefix", default="")
    return parser.parse_args(argv)


def load(path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise Failure(f"cannot read store {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise Failure(f"cannot read store {path}: not an object of strings")
    return data


def save(path, data):
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise Failure(f"cannot write store {path}: {exc.strerror}") from None


def run(args):
    data = load(args.store)
    if args.command == "set":
        if args.if_absent and args.key in data:
            raise Failure(f"key exists: {args.key}")
        data[args.key] = args.value
        save(args.store, data)
        print("OK")
    elif args.command == "get":
        if args.key in data:
            print(data[args.key])
        elif args.default is not None:
            print(args.default)
        else:
            raise Failure(f"no such key: {args.key}")
    elif args.command == "delete":
        if args.key not in data:
            raise Failure(f"no such key: {args.key}")
        del data[args.key]
        save(args.store, data)
        print(f"deleted {args.key}")
    elif args.command == "list":
        chosen = {k: v for k, v in sorted(data.items()) if k.startswith(args.prefix)}
        if args.json:
            print(json.dumps(chosen, indent=2, sort_keys=True, ensure_ascii=False))
        else:
            for key, value in chosen.items():
                print(f"{key}={value}" if args.values else key)
    elif args.command == "incr":
        current = data.get(args.key, "0")
        if not re.fullmatch(r"-?[0-9]+", current):
            raise Failure(f"not an integer: {args.key}")
        number = int(current)
        if not -1000 <= args.by <= 1000:
            raise Failure("--by must be between -1000 and 1000")
        data[args.key] = str(number + args.by)
        save(args.store, data)
        print(data[args.key])
    elif args.command == "count":
        print(sum(1 for k in data if k.startswith(args.prefix)))


def main(argv):
    args = parse(argv)
    try:
        run(args)
    except Failure as exc:
        print(f"kv: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
