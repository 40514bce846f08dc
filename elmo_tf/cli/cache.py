"""``elmo-tf cache``: what the model cache holds, and removing it.

``elmo-tf cache list`` prints each cached file (the published model it belongs to, if any),
its size and where it is; ``elmo-tf cache remove NAME_OR_URL...`` removes a published model's
files or one URL's; ``elmo-tf cache clear`` removes every file the cache made (nothing else:
the directory may hold other files). The cache is ``ELMO_TF_CACHE_DIR``, else
``$XDG_CACHE_HOME/elmo_tf``, else ``~/.cache/elmo_tf``.
"""

import os

from elmo_tf.cli.common import CommandError
from elmo_tf.presets import cache, published


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "cache",
        help="list or remove downloaded models (the model cache)",
        description="List or remove what the model cache holds. " + __doc__.split("\n\n")[1],
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = "list the cached files, their sizes and the cache's place"
    actions.add_parser("list", help=listed, description=_sentence(listed))
    removed = "remove a published model's files, or a URL's"
    remove = actions.add_parser("remove", help=removed, description=_sentence(removed))
    remove.add_argument("targets", metavar="NAME_OR_URL", nargs="+")
    cleared = "remove every file the cache made (nothing else the directory holds)"
    actions.add_parser("clear", help=cleared, description=_sentence(cleared))
    return parser


def _sentence(help_text):
    return help_text[0].upper() + help_text[1:] + "."


def run(args):
    root = cache.cache_dir()
    if os.path.lexists(root) and not os.path.isdir(root):
        raise CommandError(
            f"{root} is not a directory: set {cache.CACHE_VARIABLE} to the cache's directory"
        )
    if args.action == "list":
        return _list()
    if args.action == "clear":
        count, kept = cache.clear()
        print(f"removed {count} cache entr{'y' if count == 1 else 'ies'} from {cache.files_dir()}")
        for directory in kept:
            print(f"kept {directory}: it holds files the cache did not make")
        return 0
    urls = []
    for target in args.targets:
        model = published.lookup(target)
        if model is not None:
            urls += model.urls()
        elif cache.is_url(target):
            urls.append(target)
        else:
            raise CommandError(
                f"{target!r} is neither a published model ({', '.join(published.names())}) "
                "nor an http(s):// URL"
            )
    for url in urls:
        existed, kept = cache.remove(url)
        print(f"{'removed' if existed else 'not cached'}: {cache.public_url(url)}")
        if kept:
            print(f"kept {kept}: it holds files the cache did not make")
    return 0


def _list():
    names = {}
    for name in sorted(published.MODELS):
        for url in published.MODELS[name].urls():
            names[cache.public_url(url)] = name  # as the cache records it
    entries = cache.entries()
    stale = cache.stale_files()
    print(f"cache: {cache.cache_dir()} ({len(entries)} files)")
    total = 0
    for entry in entries:
        total += entry.size
        print(f"{names.get(entry.url, '-')}\t{entry.size:,}\t{entry.path}\t{entry.url}")
    for path, size in stale:
        total += size
        print(f"(stale)\t{size:,}\t{path}\tleft by a download cut short; the next fetch removes it")
    print(f"total: {total:,} bytes")
    return 0
