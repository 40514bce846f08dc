"""``elmo-tf cache``: what the model cache holds, adding to it and removing it.

``elmo-tf cache list`` prints each cached file (the published model it belongs to, if any),
its size and where it is; ``elmo-tf cache add NAME FILE...`` puts files you already have into
the cache as a model's (an NLPL entry's archive, a published model's options and weight files),
checked as their download would be, for a machine that cannot download them;
``elmo-tf cache remove NAME_OR_URL...`` removes a published model's files or one URL's;
``elmo-tf cache clear`` removes every file the cache made (nothing else: the directory may hold
other files). The cache is ``ELMO_TF_CACHE_DIR``, else ``$XDG_CACHE_HOME/elmo_tf``, else
``~/.cache/elmo_tf``.
"""

import os

from elmo_tf.cli.common import CommandError, check_input_name
from elmo_tf.cli.model_flags import cached_urls
from elmo_tf.presets import cache_entries, nlpl, published
from elmo_tf.system import urls


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "cache",
        help="list or remove downloaded models (the model cache)",
        description="List or remove what the model cache holds. " + __doc__.split("\n\n")[1],
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = "list the cached files, their sizes and the cache's place"
    actions.add_parser("list", help=listed, description=_sentence(listed))
    added = "add files you have as a model's: an NLPL entry's archive, a published model's two"
    add = actions.add_parser("add", help=added, description=_sentence(added) + (
        " Each is checked as its download would be, and recorded with its size and SHA-256; "
        "the model then loads offline by its name (elmo-tf cache add efml-ru 170.zip)."
    ))  # fmt: skip
    add.add_argument("name", metavar="NAME", help="an NLPL entry (nlpl:144, efml-ru) or a "
                     "published model (small, ...)")  # fmt: skip
    add.add_argument("paths", metavar="FILE", nargs="+", help="its archive; or its options "
                     "file, then its weight file")  # fmt: skip
    removed = "remove a published model's files, an NLPL entry's archive, or a URL's"
    remove = actions.add_parser("remove", help=removed, description=_sentence(removed))
    remove.add_argument("targets", metavar="NAME_OR_URL", nargs="+")
    cleared = "remove every file the cache made (nothing else the directory holds)"
    actions.add_parser("clear", help=cleared, description=_sentence(cleared))
    return parser


def _sentence(help_text):
    return help_text[0].upper() + help_text[1:] + "."


def run(args):
    root = cache_entries.cache_dir()
    if os.path.lexists(root) and not os.path.isdir(root):
        raise CommandError(
            f"{root} is not a directory: set {cache_entries.CACHE_VARIABLE} to the cache's "
            "directory"
        )
    if args.action == "list":
        return _list()
    if args.action == "add":
        from elmo_tf import presets  # lazy: the checks of the files (no TensorFlow)

        for path in args.paths:
            check_input_name(path, "FILE")
        for path, cached in zip(args.paths, presets.add_to_cache(args.name, args.paths)):
            print(f"added {path} as {args.name}: {cached}")
        return 0
    if args.action == "clear":
        count, kept = cache_entries.clear()
        print(
            f"removed {count} cache entr{'y' if count == 1 else 'ies'} from "
            f"{cache_entries.files_dir()}"
        )
        for directory in kept:
            print(f"kept {directory}: it holds files the cache did not make")
        return 0
    targets = []  # every target checked before anything is removed
    for target in args.targets:
        if urls.is_url(target):
            cache_entries.entry_path(target)  # a usable URL
            targets.append(target)
        else:
            targets += cached_urls(target, "remove")
    for url in targets:
        existed, kept = cache_entries.remove(url)
        print(f"{'removed' if existed else 'not cached'}: {urls.public_url(url)}")
        if kept:
            print(f"kept {kept}: it holds files the cache did not make")
    return 0


def _tree_size(folder):
    return sum(
        os.lstat(os.path.join(root, name)).st_size
        for root, _, names in os.walk(folder)
        for name in names
    )


def _list():
    names = {}
    for name in sorted(published.MODELS):
        for url in published.MODELS[name].urls():
            names[urls.public_url(url)] = name  # as the cache records it
    for entry in nlpl.ENTRIES.values():
        names[urls.public_url(entry.url())] = entry.alias
    entries = cache_entries.entries()
    stale = cache_entries.stale_files()
    print(f"cache: {cache_entries.cache_dir()} ({len(entries)} files)")
    total = 0
    for entry in entries:
        name = names.get(entry.url, "-")
        if problem := cache_entries.file_problem(entry.path):
            print(f"{name}\t-\t{entry.path}\t{entry.url}\t{problem}, not the cached file: "
                  "elmo-tf cache remove removes it")  # fmt: skip
            continue
        total += entry.size
        print(f"{name}\t{entry.size:,}\t{entry.path}\t{entry.url}")
        folder = entry.path + cache_entries.UNPACKED_SUFFIX
        if os.path.isdir(folder) and not os.path.islink(folder):
            size = _tree_size(folder)
            total += size
            print(f"{name}\t{size:,}\t{folder}\tunpacked from the archive above")
    for path, problem in cache_entries.broken_records():
        fix = "" if problem.startswith("cannot") else ", not a record: cache remove or the next "
        print(f"(broken)\t-\t{path}\t{problem}{fix and fix + 'download replaces it'}")
    for path, size in stale:
        total += size
        print(f"(stale)\t{size:,}\t{path}\tleft by a download cut short; the next fetch removes it")
    print(f"total: {total:,} bytes")
    return 0
